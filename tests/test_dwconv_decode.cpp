// CPU tests of the dwconv_decode family (Context::dwconv_decode): problem keys, argument rules (every
// field named), the space and its heuristic, the float64 reference (hand-computed steps, decode steps
// against the full causal convolution, circular states, state indices), and NVRTC compilation of
// every variant of problems that together take every option, for sm_90.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compile_batches.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_reference.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_tuning.h"
#include "lib/src/families.h"

using namespace kvtune;
using dwconv_decode::Config;
using dwconv_decode::Problem;

namespace {

void* fake(std::uintptr_t offset) { return reinterpret_cast<void*>((std::uintptr_t(1) << 24) + offset); }

// A Mamba decode step: bf16, 6 rows x 64 channels, K = 4, every tensor 16-byte aligned, 1 MiB apart.
DwConvDecodeArgs decode_args() {
  DwConvDecodeArgs a;
  a.dtype = DType::bf16;
  a.batch = 6, a.channels = 64, a.kernel_w = 4;
  a.x = fake(0), a.weight = fake(1 << 20), a.y = fake(2 << 20), a.state = fake(3 << 20);
  return a;
}

void check_invalid(const DwConvDecodeArgs& a, const std::string& field, const std::string& part) {
  try {
    dwconv_decode::validate(a);
    FAIL("accepted; expected an error naming " << field);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.context().field == field);
    CHECK(e.context().op == "dwconv_decode");
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

Problem problem_of(DType t, std::int64_t n, std::int64_t c, int k, int seq, bool circular, bool indices, bool bias,
                   Activation act, std::int64_t state_len = 0) {
  Problem p;
  p.dtype = t, p.n = n, p.c = c, p.k = k, p.seqlen = seq, p.circular = circular, p.indices = indices, p.bias = bias;
  p.activation = act;
  p.state_len = state_len == 0 ? k - 1 : state_len;
  p.align_bytes = 16;
  return p;
}

}  // namespace

TEST_CASE("dwconv_decode keys: every field, buckets, parsed back, foreign keys refused", "[dwconv][decode]") {
  DwConvDecodeArgs a = decode_args();
  Problem p = dwconv_decode::make_problem(a);
  CHECK(p.key() == "dwconv_decode,bf16,n<=8,c=64,k=4,seq=1,state=3,circular=0,indices=0,bias=0,act=none,align=16");
  CHECK(dwconv_decode::problem_from_key(p.key()) == p);
  const std::int32_t* positions = static_cast<const std::int32_t*>(fake(4 << 20));
  const std::int32_t* slots = static_cast<const std::int32_t*>(fake(5 << 20));
  a.cache_seqlens = positions, a.state_indices = slots, a.bias = fake(6 << 20), a.activation = Activation::silu;
  a.state_len = 128, a.seqlen = 3, a.state_slots = 40;
  p = dwconv_decode::make_problem(a, detail::Buckets::parse("exact"));
  CHECK(p.key() == "dwconv_decode,bf16,n=6,c=64,k=4,seq=3,state=128,circular=1,indices=1,bias=1,act=silu,align=16");
  CHECK(dwconv_decode::problem_from_key(p.key()) == p);
  // overlap_prologue: a suffix, so every key without it stays as it was.
  a.overlap_prologue = true;
  p = dwconv_decode::make_problem(a, detail::Buckets::parse("exact"));
  CHECK(p.early);
  CHECK(p.key() ==
        "dwconv_decode,bf16,n=6,c=64,k=4,seq=3,state=128,circular=1,indices=1,bias=1,act=silu,align=16,early=1");
  CHECK(dwconv_decode::problem_from_key(p.key()) == p);
  CHECK(dwconv_decode::compile_request(p, dwconv_decode::Config{128, 1, 1}, "sm_90").name_expressions.at(0) ==
        "kvt_dwconv_decode<kvt_bf16, 4, 3, 16, 1, 1, 1, 1, 1, 128, 1, 1>");
  a.overlap_prologue = false;
  // The alignment class is the least aligned tensor's (16-byte vectors down to the element).
  a.y = fake((2 << 20) + 4);
  CHECK(dwconv_decode::make_problem(a).align_bytes == 4);
  a.weight = fake((1 << 20) + 2);
  CHECK(dwconv_decode::make_problem(a).align_bytes == 2);
  // The hash sees every field.
  dwconv_decode::ProblemHash hash;
  const Problem base = dwconv_decode::make_problem(decode_args());
  std::set<std::size_t> hashes{hash(base)};
  for (int field = 0; field < 12; ++field) {
    Problem q = base;
    switch (field) {
      case 0: q.dtype = DType::f16; break;
      case 1: q.n = 16; break;
      case 2: q.n_exact = true; break;
      case 3: q.c = 128; break;
      case 4: q.k = 3; break;
      case 5: q.seqlen = 2; break;
      case 6: q.state_len = 9; break;
      case 7: q.circular = true; break;
      case 8: q.indices = true; break;
      case 9: q.bias = true; break;
      case 10: q.activation = Activation::relu; break;
      case 11: q.early = true; break;
    }
    CHECK_FALSE(q == base);
    hashes.insert(hash(q));
  }
  CHECK(hashes.size() == 13);
  // Keys the library would never build.
  const std::string key = base.key();
  for (const std::string& bad :
       {std::string("dwconv,") + key.substr(14), key + ",x=1", key + ",early=0", key + ",early=1,early=1", fmt::format("dwconv_decode,bf16,n<=6,{}", key.substr(24)),
        std::string("dwconv_decode,bf16,n<=8,c=64,k=1,seq=1,state=0,circular=0,indices=0,bias=0,act=none,align=16"),
        std::string("dwconv_decode,bf16,n<=8,c=64,k=4,seq=1,state=5,circular=0,indices=0,bias=0,act=none,align=16"),
        std::string("dwconv_decode,bf16,n<=8,c=64,k=4,seq=9,state=5,circular=1,indices=0,bias=0,act=none,align=16"),
        std::string("dwconv_decode,bf16,n<=8,c=64,k=4,seq=65,state=3,circular=0,indices=0,bias=0,act=none,align=16"),
        std::string("dwconv_decode,bf16,n<=8,c=64,k=4,seq=1,state=3,circular=0,indices=0,bias=0,act=tanh,align=16"),
        std::string("dwconv_decode,bf16,n<=8,c=64,k=4,seq=1,state=3,circular=0,indices=0,bias=0,act=none,align=1"),
        std::string("dwconv_decode,bf16,n<=8,c=64,k=4,seq=1,state=3,circular=0,indices=0,bias=0,act=none,align=32")}) {
    INFO(bad);
    CHECK_FALSE(dwconv_decode::problem_from_key(bad));
  }
}

TEST_CASE("dwconv_decode argument rules name the field", "[dwconv][decode]") {
  dwconv_decode::validate(decode_args());
  DwConvDecodeArgs a = decode_args();
  a.dtype = static_cast<DType>(3);
  check_invalid(a, "dtype", "unknown dtype value 3");
  a = decode_args(), a.activation = static_cast<Activation>(9);
  check_invalid(a, "activation", "unknown activation value 9");
  a = decode_args(), a.batch = 0;
  check_invalid(a, "batch", "batch must be positive");
  a = decode_args(), a.channels = -3;
  check_invalid(a, "channels", "channels must be positive");
  a = decode_args(), a.seqlen = 0;
  check_invalid(a, "seqlen", "seqlen must be in 1..64");
  a.seqlen = 65;
  check_invalid(a, "seqlen", "seqlen must be in 1..64");
  a = decode_args(), a.kernel_w = 1;
  check_invalid(a, "kernel_w", "kernel_w must be in 2..63");
  a.kernel_w = 64;
  check_invalid(a, "kernel_w", "kernel_w must be in 2..63");
  a = decode_args(), a.batch = std::int64_t(1) << 20, a.channels = std::int64_t(1) << 12;
  check_invalid(a, "batch", "batch x channels must be below 2^31");
  // The state: exactly K - 1 inputs without cache_seqlens; a circular buffer of at least K - 1 and seqlen.
  a = decode_args(), a.state_len = 3;
  dwconv_decode::validate(a);
  a.state_len = 4;
  check_invalid(a, "state_len", "exactly kernel_w - 1 = 3 inputs");
  a.state_len = -1;
  check_invalid(a, "state_len", "state_len must be >= 0");
  a = decode_args(), a.cache_seqlens = static_cast<const std::int32_t*>(fake(4 << 20)), a.state_len = 2;
  check_invalid(a, "state_len", "kernel_w - 1 <= state_len");
  a.state_len = 3, a.seqlen = 4;
  check_invalid(a, "state_len", "seqlen <= state_len");
  a.state_len = 0, a.seqlen = 3;
  dwconv_decode::validate(a);  // 0: kernel_w - 1
  a.state_len = std::int64_t(1) << 31;
  check_invalid(a, "state_len", "state_len < 2^31");
  a.state_len = std::int64_t(1) << 30, a.state_slots = 1 << 12;
  check_invalid(a, "state_len", "exceeds 2^40 elements");
  // Slots: at least batch without state_indices; any number with them.
  a = decode_args(), a.state_slots = 5;
  check_invalid(a, "state_slots", "state_slots must be >= batch");
  a.state_indices = static_cast<const std::int32_t*>(fake(5 << 20));
  dwconv_decode::validate(a);
  a.state_slots = -2;
  check_invalid(a, "state_slots", "state_slots must be >= 0");
  a.state_slots = std::int64_t(1) << 31;
  check_invalid(a, "state_slots", "below 2^31");
  // Pointers: the four tensors are needed, each aligned to its element; the int32 arrays to 4 bytes.
  for (const char* field : {"x", "weight", "y", "state"}) {
    a = decode_args();
    if (std::string(field) == "x") a.x = nullptr;
    if (std::string(field) == "weight") a.weight = nullptr;
    if (std::string(field) == "y") a.y = nullptr;
    if (std::string(field) == "state") a.state = nullptr;
    check_invalid(a, field, std::string(field) + " is a null pointer");
  }
  a = decode_args(), a.state = fake((3 << 20) + 1);
  check_invalid(a, "state", "state must be aligned to 2 bytes");
  a = decode_args(), a.bias = fake((6 << 20) + 3);
  check_invalid(a, "bias", "bias must be aligned to 2 bytes");
  a = decode_args(), a.cache_seqlens = static_cast<const std::int32_t*>(fake((4 << 20) + 2));
  check_invalid(a, "cache_seqlens", "aligned to 4 bytes");
  a = decode_args(), a.state_indices = static_cast<const std::int32_t*>(fake((5 << 20) + 2));
  check_invalid(a, "state_indices", "aligned to 4 bytes");
  // No output overlaps an input or the other output.
  a = decode_args(), a.y = const_cast<void*>(a.x);
  check_invalid(a, "y", "y overlaps x");
  a = decode_args(), a.state = fake((2 << 20) + 64);
  check_invalid(a, "state", "state overlaps y");
  a = decode_args(), a.bias = fake((3 << 20) + 16);
  check_invalid(a, "state", "state overlaps bias");
  a = decode_args(), a.state_indices = static_cast<const std::int32_t*>(fake(2 << 20));
  check_invalid(a, "y", "y overlaps state_indices");
}

TEST_CASE("dwconv_decode space: valid variants, their rules, geometry, heuristic inside", "[dwconv][decode]") {
  int problems = 0;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (std::int64_t c : {1, 3, 24, 1000, 8192})
      for (int k : {2, 4, 17, 63})
        for (int seq : {1, 3, 8, 64})
          for (std::int64_t n : {1, 64, 4096}) {
            const Problem p = problem_of(t, n, c, k, seq, seq > 1, false, true, Activation::silu, seq > 1 ? 64 : 0);
            INFO(p.key());
            ++problems;
            const auto space = dwconv_decode::enumerate(p);
            REQUIRE_FALSE(space.empty());
            const Config h = dwconv_decode::heuristic_config(p, 9);
            CHECK(std::find(space.begin(), space.end(), h) != space.end());
            for (const Config& cfg : space) {
              CHECK(p.c % cfg.channels_per_thread == 0);
              CHECK(cfg.tokens_per_thread <= p.seqlen);
              CHECK(cfg.channels_per_thread * (cfg.tokens_per_thread + 2 * p.k - 1) <= 160);
              const auto g = dwconv_decode::geometry(p, cfg, p.n);
              const std::int64_t groups = (p.seqlen + cfg.tokens_per_thread - 1) / cfg.tokens_per_thread;
              const std::int64_t per_block = g.block / groups;
              CHECK(g.block % groups == 0);
              CHECK(g.block <= unsigned(cfg.block_threads));
              // Every channel vector of every row has its threads, no block lies wholly past a row.
              CHECK(std::int64_t(g.grid) * per_block >= p.n * p.c / cfg.channels_per_thread);
              CHECK(std::int64_t(g.grid - p.n) * per_block < p.n * p.c / cfg.channels_per_thread);
              CHECK(Config::from_json(cfg.to_json()) == cfg);
              CHECK(dwconv_decode::predicted_seconds(p, cfg, 132, 3e12) > 0);
            }
          }
  CHECK(problems == 3 * 5 * 4 * 4 * 3);
  // The rules, each with its reason.
  const Problem p = problem_of(DType::f32, 8, 12, 4, 5, true, false, false, Activation::none, 16);
  std::string why;
  CHECK_FALSE(dwconv_decode::is_valid(p, Config{96, 1, 1}, &why));
  CHECK(why.find("threads per block") != std::string::npos);
  CHECK_FALSE(dwconv_decode::is_valid(p, Config{64, 8, 1}, &why));
  CHECK(why.find("divide the channels") != std::string::npos);
  CHECK_FALSE(dwconv_decode::is_valid(p, Config{64, 1, 6}, &why));
  CHECK(why.find("tokens per thread") != std::string::npos);
  CHECK_FALSE(dwconv_decode::is_valid(p, Config{512, 1, 1}, &why));
  CHECK(why.find("half of every block idle") != std::string::npos);
  CHECK(dwconv_decode::is_runnable(p, Config{512, 1, 1}, &why));  // pruned, but it runs (a stored winner may)
  const Problem wide = problem_of(DType::f32, 8, 64, 63, 1, false, false, false, Activation::none);
  CHECK_FALSE(dwconv_decode::is_valid(wide, Config{32, 2, 1}, &why));
  CHECK(why.find("registers") != std::string::npos);
  CHECK(dwconv_decode::is_valid(wide, Config{32, 1, 1}, &why));
  // Labels are short and distinct; seqlen 1 has no token axis to tune.
  const auto space = dwconv_decode::enumerate(problem_of(DType::bf16, 64, 4096, 4, 1, false, true, true, Activation::silu));
  std::set<std::string> labels;
  for (const Config& c : space) labels.insert(c.label());
  CHECK(labels.size() == space.size());
  CHECK(space.size() == 5 * 4);
  CHECK(Config{128, 4, 1}.label() == "bt=128,vc=4,tt=1");
  // The heuristic (from the H200's recorded trials): vectors of at most 8 bytes, the widest that
  // leaves 2^17 threads; a circular state one channel a thread in blocks of 512; every token in one
  // thread when the registers allow.
  CHECK(dwconv_decode::heuristic_config(problem_of(DType::bf16, 64, 8192, 4, 1, false, true, true, Activation::silu), 9)
            .label() == "bt=128,vc=4,tt=1");
  CHECK(dwconv_decode::heuristic_config(problem_of(DType::bf16, 64, 4096, 4, 1, false, true, true, Activation::silu), 9)
            .label() == "bt=128,vc=2,tt=1");
  CHECK(dwconv_decode::heuristic_config(problem_of(DType::f32, 1024, 8192, 4, 1, false, true, true, Activation::silu), 9)
            .label() == "bt=128,vc=2,tt=1");  // 8 bytes: two f32 channels
  CHECK(dwconv_decode::heuristic_config(problem_of(DType::bf16, 1, 2048, 4, 1, false, false, true, Activation::silu), 9)
            .label() == "bt=128,vc=1,tt=1");
  CHECK(dwconv_decode::heuristic_config(problem_of(DType::f32, 256, 4096, 4, 4, true, false, false, Activation::none, 8), 9)
            .label() == "bt=512,vc=1,tt=4");
  CHECK(dwconv_decode::heuristic_config(problem_of(DType::f32, 2, 64, 63, 64, true, false, false, Activation::none, 64), 9)
            .label() == "bt=512,vc=1,tt=8");  // 64 tokens of K = 63 do not fit one thread

  CHECK_THROWS_AS(Config::from_json(nlohmann::json::object({{"bt", 128}, {"vc", 4}})), Error);
}

TEST_CASE("dwconv_decode model bytes count each tensor once", "[dwconv][decode]") {
  // bf16, 64 x 4096, K = 4, bias: x and y (64 x 4096 each), 3 state entries read and 3 written per
  // channel of a row, weight 4096 x 4 and bias 4096.
  const Problem p = problem_of(DType::bf16, 64, 4096, 4, 1, false, false, true, Activation::silu);
  CHECK(dwconv_decode::model_bytes(p, 64) == 2.0 * (2 * 64 * 4096 + 64 * 4096 * 6 + 4096 * 5));
  // Circular: K - 1 read, seqlen written, plus the int32 positions and indices.
  const Problem q = problem_of(DType::f32, 8, 100, 4, 2, true, true, false, Activation::none, 50);
  CHECK(dwconv_decode::model_bytes(q, 8) == 4.0 * (2 * 8 * 100 * 2 + 8 * 100 * 5 + 100 * 4) + 8 * 8);
}

TEST_CASE("dwconv_decode reference: hand-computed steps", "[dwconv][decode]") {
  // One channel, K = 3: state [1, 2], x [3], w [1, 10, 100], bias 0.5.
  Problem p = problem_of(DType::f32, 1, 1, 3, 1, false, false, true, Activation::none);
  std::vector<double> state{1, 2}, y(1);
  dwconv_decode::reference_decode(p, 1, 1, {3}, {1, 10, 100}, {0.5}, {}, {}, state, y);
  CHECK(y[0] == 321.5);
  CHECK(state == std::vector<double>{2, 3});
  // Two tokens [3, 4] at once, relu: y = [321.5, 2 + 30 + 400 + 0.5], state [3, 4].
  p.seqlen = 2, p.activation = Activation::relu;
  state = {1, 2}, y.assign(2, 0);
  dwconv_decode::reference_decode(p, 1, 1, {3, 4}, {1, 10, 100}, {0.5}, {}, {}, state, y);
  CHECK(y == std::vector<double>{321.5, 432.5});
  CHECK(state == std::vector<double>{3, 4});
  // Circular, state_len 4 (position q at index q % 4) holding [10, 20, 30, 40]; the row's first new
  // token is position 5, so its history is positions 3 and 4: indices 3 and 0, [40, 10].
  p = problem_of(DType::f32, 1, 1, 3, 1, true, false, false, Activation::none, 4);
  state = {10, 20, 30, 40}, y.assign(1, 0);
  dwconv_decode::reference_decode(p, 1, 1, {7}, {1, 10, 100}, {}, {5}, {}, state, y);
  CHECK(y[0] == 40 + 100 + 700);
  CHECK(state == std::vector<double>{10, 7, 30, 40});  // position 5 at index 1
  // Position 1: the history reaches position -1, which reads as zero (a fresh sequence).
  state = {10, 20, 30, 40};
  dwconv_decode::reference_decode(p, 1, 1, {7}, {1, 10, 100}, {}, {1}, {}, state, y);
  CHECK(y[0] == 0 + 10 * 10 + 700);
  CHECK(state == std::vector<double>{10, 7, 30, 40});
  // A negative position: NaN, the state left alone.
  dwconv_decode::reference_decode(p, 1, 1, {7}, {1, 10, 100}, {}, {-1}, {}, state, y);
  CHECK(std::isnan(y[0]));
  CHECK(state == std::vector<double>{10, 7, 30, 40});
}

TEST_CASE("dwconv_decode reference: state indices, padding rows, out-of-range slots", "[dwconv][decode]") {
  // 3 rows over 4 slots: row 0 uses slot 2, row 1 is padding, row 2 names slot 4 (out of range).
  const Problem p = problem_of(DType::f32, 3, 2, 2, 1, false, true, false, Activation::none);
  std::vector<double> state{1, 2, 3, 4, 5, 6, 7, 8}, y(6, -99);
  dwconv_decode::reference_decode(p, 3, 4, {1, 1, 2, 2, 3, 3}, {1, 1, 1, 2}, {}, {}, {2, -1, 4}, state, y);
  CHECK(y[0] == 5 + 1);
  CHECK(y[1] == 6 + 2);
  CHECK(y[2] == -99);  // padding: not written
  CHECK(y[3] == -99);
  CHECK(std::isnan(y[4]));
  CHECK(std::isnan(y[5]));
  CHECK(state == std::vector<double>{1, 2, 3, 4, 1, 1, 7, 8});
}

TEST_CASE("dwconv_decode reference: steps continue the full causal convolution", "[dwconv][decode]") {
  // A sequence of L tokens: the causal conv1d of dwconv's reference, against a decode with the first
  // P tokens as the state's history and the rest in steps of 1, 2 and 5 tokens, shifted and circular.
  const std::int64_t c = 3, length = 23;
  for (int k : {2, 4, 7})
    for (Activation act : {Activation::none, Activation::silu, Activation::gelu_erf}) {
      dwconv::Problem conv;
      conv.direction = DwDirection::forward, conv.layout = DwLayout::ncl, conv.n = 1, conv.c = c, conv.w = length;
      conv.kw = k, conv.pad_left = k - 1, conv.bias = true, conv.activation = act;
      const auto x = random_vector(std::size_t(c * length), 1000 + k);
      const auto w = random_vector(std::size_t(c * k), 2000 + k);
      const auto bias = random_vector(std::size_t(c), 3000 + k);
      const auto full = dwconv::reference_forward(conv, 1, x, w, bias);
      for (bool circular : {false, true})
        for (int step : {1, 2, 5}) {
          INFO("k=" << k << " act=" << to_string(act) << " circular=" << circular << " step=" << step);
          const std::int64_t len = circular ? 16 : k - 1;
          Problem p = problem_of(DType::f32, 1, c, k, step, circular, false, true, act, len);
          // The state after the first `start` tokens: zeros before position 0.
          const std::int64_t start = 6;
          std::vector<double> state(std::size_t(c * len), 0.0);
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t q = 0; q < start; ++q) {
              const std::int64_t j = circular ? q % len : q - (start - len);
              if (j >= 0) state[std::size_t(ch * len + j)] = x[std::size_t(ch * length + q)];
            }
          double worst = 0;
          for (std::int64_t t0 = start; t0 + step <= length; t0 += step) {
            std::vector<double> xs(std::size_t(c * step)), y(std::size_t(c * step));
            for (std::int64_t ch = 0; ch < c; ++ch)
              for (int t = 0; t < step; ++t) xs[std::size_t(ch * step + t)] = x[std::size_t(ch * length + t0 + t)];
            dwconv_decode::reference_decode(p, 1, 1, xs, w, bias, {std::int32_t(t0)}, {}, state, y);
            for (std::int64_t ch = 0; ch < c; ++ch)
              for (int t = 0; t < step; ++t)
                worst = std::max(worst, std::fabs(y[std::size_t(ch * step + t)] - full[std::size_t(ch * length + t0 + t)]));
          }
          CHECK(worst < 1e-12);
        }
    }
}

TEST_CASE("dwconv_decode harness inputs are exact in every dtype", "[dwconv][decode]") {
  CHECK(dwconv_decode::exact_bits(DType::f32, 1.0) == 0x3f800000u);
  CHECK(dwconv_decode::exact_bits(DType::bf16, -0.5) == 0xbf00u);
  CHECK(dwconv_decode::exact_bits(DType::f16, 1.0) == 0x3c00u);
  CHECK(dwconv_decode::exact_bits(DType::f16, -2.0) == 0xc000u);
  CHECK(dwconv_decode::exact_bits(DType::f16, 1.0 / 64) == 0x2400u);
  CHECK(dwconv_decode::exact_bits(DType::f16, 63.0 / 64) == 0x3be0u);
  CHECK(dwconv_decode::exact_bits(DType::f16, 0.0) == 0u);
}

TEST_CASE("dwconv_decode is a registered family", "[dwconv][decode]") {
  using F = detail::DwConvDecodeFamily;
  CHECK(std::string(F::kOp) == "dwconv_decode");
  CHECK(detail::FamilyIndex<F>::value == 2);
  CHECK(detail::FamilyIndex<detail::DwConvFamily>::value == 1);
  const Problem p = dwconv_decode::make_problem(decode_args());
  CHECK(F::from_key(p.key()) == p);
  CHECK(F::distance(p, p) == 0);
  Problem q = p;
  q.c *= 2;
  CHECK(F::distance(p, q) == 2);
  q.seqlen = 2;
  CHECK(std::isinf(F::distance(p, q)));
  CHECK(detail::tuning_configs<F>(p, 9).size() == dwconv_decode::enumerate(p).size());
}

// Every variant of problems that together take every option (dtype, taps, tokens, state form,
// indices, bias, activation, alignment) compiles for sm_90.
TEST_CASE("every dwconv_decode variant of the option problems compiles for sm_90", "[dwconv][decode][nvrtc][compiles]") {
  std::vector<Problem> problems;
  const Activation acts[] = {Activation::none, Activation::silu, Activation::gelu_tanh, Activation::gelu_erf,
                             Activation::relu};
  int i = 0;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (bool circular : {false, true})
      for (bool indices : {false, true}) {
        const int seq = (i % 3 == 0) ? 1 : (i % 3 == 1) ? 3 : 8;
        const int k = (i % 4 == 3) ? 33 : 2 + i % 3;
        Problem p = problem_of(t, 64, 24, k, seq, circular, indices, i % 2 == 0, acts[i % 5], circular ? 40 : 0);
        p.align_bytes = (i % 3 == 2) ? p.element_bytes() : 16;
        problems.push_back(p);
        ++i;
      }
  std::vector<detail::CompileRequest> batches;
  std::size_t expected = 0;
  for (const Problem& p : problems) {
    std::vector<detail::CompileRequest> requests{dwconv_decode::support_request(p, "sm_90")};
    for (const Config& c : dwconv_decode::enumerate(p)) requests.push_back(dwconv_decode::compile_request(p, c, "sm_90"));
    expected += requests.size();
    test::add_batched(batches, requests, 32);
  }
  const std::size_t compiled = test::check_compiled(batches, expected);
  WARN(compiled << " dwconv_decode kernels of " << problems.size() << " problems compiled for sm_90");
}
