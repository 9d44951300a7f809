// CPU tests of each dwconv kernel's space and rules: register-tiled and staged weight gradients,
// rows and runs per thread, flat items, staged channel-last tiles, kernels over 64 taps, the
// heuristic's choices, tensor-core tiles; their geometry, names, cost-model ranking, and NVRTC
// compilation of a selection. The family's values and reference: test_dwconv.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compile_batches.h"
#include "dwconv_fixtures.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_sizes.h"

using namespace kvtune;
using namespace kvtune::test;
using dwconv::Config;
using dwconv::Problem;

namespace {

// The shape constants that close a 2D variant's name (Problem::fixed_shape): C and the source and
// destination planes; empty (just ">") where the sizes stay run-time arguments.
std::string shape_tail(const Problem& p) {
  if (!p.fixed_shape()) return ">";
  return fmt::format(", {}, {}, {}, {}, {}>", p.c, p.src_h(), p.src_w(), p.dst_h(), p.dst_w());
}

}  // namespace

TEST_CASE("register-tiled weight gradients: every tap kept, runs of outputs, ranked by the cost model", "[dwconv]") {
  // The suites' weight gradients: Mamba causal K=4 NCL and MobileNetV2 3x3 NCHW, f32.
  DwConvArgs mamba = args_1d(DwDirection::backward_weight, DwLayout::ncl, 4, 1, 1);
  mamba.n = 8, mamba.c = 4096, mamba.w = 2048;
  mamba.pad_left = mamba.pad_right = 0;
  mamba.causal = true;
  DwConvArgs mobile = args_2d(DwDirection::backward_weight, DwLayout::nchw);
  mobile.n = 32, mobile.c = 144, mobile.h = mobile.w = 56;
  for (const DwConvArgs& a : {mamba, mobile}) {
    const Problem p = dwconv::make_problem(a);
    INFO(p.key());
    const auto all = dwconv::enumerate(p);
    std::vector<std::pair<double, Config>> ranked;
    int tiled = 0;
    for (const auto& config : all) {
      ranked.emplace_back(dwconv::predicted_seconds(p, config, 132, 4.2e12), config);
      const dwconv::WgradConfig& c = config.wgrad();
      if (c.outputs_per_thread <= 1) continue;
      ++tiled;
      CHECK((c.taps_per_block == p.kh * p.kw || (p.kh > 1 && c.taps_per_block == p.kw)));
      CHECK(c.label().find(",rw=") != std::string::npos);
      if (c.vector_channels > 1 || c.rows_per_thread > 1) continue;  // their names: the next test case
      const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
      // RW closes a run-time name; before a 2D problem's shape constants come RH, VC, PIPE, EPI and
      // SEQ at their defaults.
      const std::string tail = p.fixed_shape() ? fmt::format(", {}, 1, 1, -1, 0, 0{}", c.outputs_per_thread, shape_tail(p))
                                               : fmt::format(", {}>", c.outputs_per_thread);
      CHECK(Catch::endsWith(name, tail));
    }
    CHECK(tiled >= 4);
    // The model ranks a tiled variant first, so the budgeted search always tries some.
    std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    CHECK(ranked.front().second.wgrad().outputs_per_thread > 1);
    // A run needs every tap, or every tap of one kernel row.
    dwconv::WgradConfig c = ranked.front().second.wgrad();
    c.taps_per_block = 2;
    CHECK_FALSE(dwconv::is_valid(p, c));
  }
  // 7x7 (49 taps): every tap in registers, or one kernel row per block column (tg = kw); 31x31:
  // too many accumulators for every tap, one kernel row only.
  for (int k : {7, 31}) {
    DwConvArgs big = mobile;
    big.kernel_h = big.kernel_w = k;
    big.pad_top = big.pad_bottom = big.pad_left = big.pad_right = k / 2;
    const Problem p = dwconv::make_problem(big);
    int tiled = 0, every_tap = 0;
    for (const auto& config : dwconv::enumerate(p)) {
      const dwconv::WgradConfig& c = config.wgrad();
      if (c.outputs_per_thread <= 1) continue;
      ++tiled;
      CHECK((c.taps_per_block == k || (k == 7 && c.taps_per_block == 49)));
      every_tap += c.taps_per_block == k * k;
    }
    CHECK(tiled >= 4);
    CHECK((k == 7 ? every_tap >= 4 : every_tap == 0));
    dwconv::WgradConfig c = dwconv::wgrad_config(1, 128, k, 1, 0, 4, 1, 1);
    CHECK(dwconv::is_valid(p, c));
    c.taps_per_block = k - 1;  // neither every tap nor one row
    CHECK_FALSE(dwconv::is_valid(p, c));
  }
}

TEST_CASE("weight gradients: vectors along W and rows per thread follow their rules", "[dwconv]") {
  // MobileNetV2 3x3 and ConvNeXt 7x7 NCHW f32 (W = 56): both axes in the space.
  for (int k : {3, 7}) {
    DwConvArgs a = args_2d(DwDirection::backward_weight, DwLayout::nchw);
    a.n = 32, a.c = 96, a.h = a.w = 56;
    a.kernel_h = a.kernel_w = k;
    a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = k / 2;
    const Problem p = dwconv::make_problem(a);
    INFO(p.key());
    int vectors = 0, rows = 0;
    for (const auto& config : dwconv::enumerate(p)) {
      const dwconv::WgradConfig& c = config.wgrad();
      const int vc = c.vector_channels, rh = c.rows_per_thread;
      if (vc == 1 && rh == 1) continue;
      CHECK(c.outputs_per_thread > 1);
      CHECK(c.outputs_per_thread % vc == 0);
      if (rh > 1) CHECK(c.taps_per_block == k * k);
      vectors += vc > 1;
      rows += rh > 1;
      CHECK(c.label().find(vc > 1 ? fmt::format(",vc={}", vc) : ",rw=") != std::string::npos);
      CHECK((rh == 1 || c.label().find(fmt::format(",rh={}", rh)) != std::string::npos));
      // RW, RH and VC, then (not staged) PIPE, EPI and SEQ at their defaults and the shape constants.
      const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
      const auto suffix = fmt::format(", {}, {}, {}{}{}", c.outputs_per_thread, rh, vc, c.staged ? "" : ", -1, 0, 0",
                                      shape_tail(p));
      CHECK(Catch::endsWith(name, suffix));
      CHECK(Config::from_json(config.to_json()) == config);
      CHECK(dwconv::geometry(p, config, p.n).grid_y == static_cast<unsigned>(c.splits));
    }
    CHECK(vectors >= 8);
    CHECK(rows >= 8);
    // The heuristic for f32 7x7: staged x planes, 4 rows of runs of 8 as 4-element vectors, every tap,
    // 128 threads, 5 splits (next test case). 3x3 and other types: 2 rows of runs of 8 from global
    // memory, 8 splits (96 channels x 8 fill ~5 blocks an SM of a 132-SM device). The space holds both.
    const Config h = dwconv::heuristic_config(p, 8);
    CHECK(h.label() == (k == 7 ? "wgrad,ct=1,py=128,tg=49,split=5,reduce=ordered,rw=8,vc=4,rh=4,staged"
                               : "wgrad,ct=1,py=128,tg=9,split=8,reduce=ordered,rw=8,vc=4,rh=2"));
    const auto space = dwconv::enumerate(p);
    CHECK(std::find(space.begin(), space.end(), h) != space.end());
    DwConvArgs half = a;
    half.dtype = DType::bf16;
    const Problem pb = dwconv::make_problem(half);
    const Config hb = dwconv::heuristic_config(pb, 8);
    CHECK(hb.label() == fmt::format("wgrad,ct=1,py=128,tg={},split=8,reduce=ordered,rw=8,vc=4,rh=2", k * k));
    const auto space_b = dwconv::enumerate(pb);
    CHECK(std::find(space_b.begin(), space_b.end(), hb) != space_b.end());
    // Rows per thread need every tap; vectors need rows that are a multiple of the width.
    dwconv::WgradConfig c = dwconv::heuristic_config(p, 8).wgrad();
    c.outputs_per_thread = 4, c.vector_channels = 4, c.rows_per_thread = 2, c.taps_per_block = k * k;
    std::string why;
    CHECK(dwconv::is_valid(p, c, &why));
    INFO(why);
    c.taps_per_block = k;
    CHECK_FALSE(dwconv::is_valid(p, c));
    c.taps_per_block = k * k, c.rows_per_thread = 1, c.outputs_per_thread = 1;
    CHECK_FALSE(dwconv::is_valid(p, c));  // vectors need register-tiled runs
    DwConvArgs odd = a;
    odd.w = 54;  // 54 = 2 x 27: no 4-element vectors; the space offers 2
    const Problem q = dwconv::make_problem(odd);
    c.outputs_per_thread = 4, c.vector_channels = 4;
    CHECK_FALSE(dwconv::is_valid(q, c));
    for (const auto& v : dwconv::enumerate(q)) CHECK(v.wgrad().vector_channels <= 2);
    // A 1D weight gradient keeps one row: runs of 8, 256 threads.
    DwConvArgs flat_1d = args_1d(DwDirection::backward_weight, DwLayout::ncl, k, 1, 1);
    flat_1d.n = 8, flat_1d.c = 64, flat_1d.w = 4096;
    const dwconv::WgradConfig h1 = dwconv::heuristic_config(dwconv::make_problem(flat_1d), 8).wgrad();
    CHECK(dwconv::is_valid(dwconv::make_problem(flat_1d), h1));
    CHECK(h1.rows_per_thread == 1);
    CHECK(h1.position_threads == 256);
    CHECK(h1.outputs_per_thread == 8);
  }
  // Channel-last weight gradients have no vectors along W.
  DwConvArgs last = args_2d(DwDirection::backward_weight, DwLayout::nhwc);
  for (const auto& c : dwconv::enumerate(dwconv::make_problem(last))) CHECK(c.wgrad().vector_channels == 1);
}

TEST_CASE("staged weight gradients: x planes in shared memory, their rules, size, splits and names", "[dwconv][nvrtc][heavy]") {
  // ConvNeXt 7x7 on 96 channels and MobileNetV2 3x3 on 144, NCHW f32, 32 images of 56 x 56.
  DwConvArgs a = args_2d(DwDirection::backward_weight, DwLayout::nchw);
  a.n = 32, a.c = 96, a.h = a.w = 56;
  a.kernel_h = a.kernel_w = 7;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 3;
  const Problem p = dwconv::make_problem(a);
  int staged = 0;
  for (const auto& config : dwconv::enumerate(p)) {
    const dwconv::WgradConfig& c = config.wgrad();
    if (!c.staged) continue;
    ++staged;
    INFO(c.label());
    CHECK(c.channels_per_block == 1);
    CHECK(c.taps_per_block == 49);
    CHECK(c.outputs_per_thread > 1);
    CHECK(c.rows_per_thread > 1);
    CHECK(c.splits <= 32);
    CHECK(c.label().substr(c.label().size() - 7) == ",staged");
    CHECK(Config::from_json(config.to_json()) == config);
    const auto g = dwconv::geometry(p, config, p.n);
    CHECK(g.grid_x == 96u);
    CHECK(g.grid_y == static_cast<unsigned>(c.splits));
    CHECK(g.block == static_cast<unsigned>(c.position_threads));
    CHECK(g.dynamic_smem > 0);
    CHECK(g.dynamic_smem <= 96 * 1024);
    const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
    CHECK(name.rfind("kvt_dwconv_wgrad_staged<float, 7, 7, 1, 1, 1, 1, 3, 3, ", 0) == 0);
    const auto suffix = fmt::format(", {}, {}, {}, 96, 56, 56, 56, 56>", c.outputs_per_thread, c.rows_per_thread,
                                    c.vector_channels);
    CHECK(Catch::endsWith(name, suffix));
  }
  CHECK(staged >= 40);
  // The heuristic's plane: rows -3..58 (62) x columns from -4 (6 runs of 8 + a window of 16) = 64, f32,
  // two buffers: 2 x 62 x 64 x 4 bytes. 5 splits: 96 x 5 = 480 blocks, one wave of 4 an SM on 132 SMs.
  const dwconv::WgradConfig h = dwconv::heuristic_config(p, 8).wgrad();
  REQUIRE(h.staged);
  CHECK(dwconv::geometry(p, h, p.n).dynamic_smem == 2u * 62 * 64 * 4);
  CHECK(h.splits == 5);
  // 144 channels: 3 splits of 11 images (432 blocks) beat 4 of 8 (576: two waves). 3x3 kernels keep
  // the register tiles from global memory in the heuristic; the space offers the staged planes.
  DwConvArgs mobile = a;
  mobile.c = 144;
  mobile.kernel_h = mobile.kernel_w = 3;
  mobile.pad_top = mobile.pad_bottom = mobile.pad_left = mobile.pad_right = 1;
  const Problem pm = dwconv::make_problem(mobile);
  CHECK_FALSE(dwconv::heuristic_config(pm, 8).wgrad().staged);
  dwconv::WgradConfig mobile_staged = h;
  mobile_staged.taps_per_block = 9, mobile_staged.splits = 3;
  const auto mobile_space = dwconv::enumerate(pm);
  CHECK(std::find(mobile_space.begin(), mobile_space.end(), Config(mobile_staged)) != mobile_space.end());
  mobile_staged.splits = 4;  // not a whole-wave count: only 1, 1, 3, 6, 12 are offered
  CHECK(std::find(mobile_space.begin(), mobile_space.end(), Config(mobile_staged)) == mobile_space.end());
  // Each rule on its own (the config passes every other one), by its reason: channel-first register
  // tiles with every tap, copies of 4+ bytes, whole-image splits up to 64.
  const auto reason = [](const Problem& q, const Config& v) {
    std::string why;
    return dwconv::is_valid(q, v, &why) ? std::string("valid") : why;
  };
  const std::string every_tap = "staged wgrad: channel-first register-tiled runs with every tap";
  dwconv::WgradConfig c = h;
  c.taps_per_block = 7, c.rows_per_thread = 1;  // one kernel row a block column: fine unstaged
  CHECK(reason(p, c) == every_tap);
  c.staged = false;
  CHECK(reason(p, c) == "valid");
  const Problem pm3 = dwconv::make_problem(mobile);
  c = h;
  c.taps_per_block = 9, c.splits = 3, c.outputs_per_thread = 1, c.vector_channels = 1, c.rows_per_thread = 1;
  CHECK(reason(pm3, c) == every_tap);  // no register tiles
  c.staged = false;
  CHECK(reason(pm3, c) == "valid");
  // A field of another kernel, or a flag other than 0 or 1, cannot be written: a stored one is refused.
  nlohmann::json foreign = Config(h).to_json();
  foreign["filter"] = 1;
  CHECK_THROWS_WITH(Config::from_json(foreign), Catch::Contains("field 'filter' is not a wgrad config's"));
  foreign = Config(h).to_json();
  foreign["halo"] = 2;
  CHECK_THROWS_WITH(Config::from_json(foreign), Catch::Contains("field 'halo' is a flag"));
  c = h;
  c.splits = 65;
  CHECK(reason(p, c) == "staged wgrad: splits 1..64 (whole images)");
  c.splits = 33;
  CHECK(reason(p, c) == "more splits than images");  // 32 images
  DwConvArgs half = a;
  half.dtype = DType::bf16;
  const Problem pb = dwconv::make_problem(half);
  c = h;
  c.vector_channels = 1;  // 2-byte copies
  CHECK(reason(pb, c) == "staged wgrad: copies of 4 bytes or more (vectors along W)");
  c.vector_channels = 2;
  CHECK(reason(pb, c) == "valid");
  DwConvArgs last = a;
  last.layout = DwLayout::nhwc;
  c = h;
  c.vector_channels = 1;  // channel-last has no vectors along W
  CHECK(reason(dwconv::make_problem(last), c) == every_tap);
  for (const auto& v : dwconv::enumerate(dwconv::make_problem(last))) CHECK_FALSE(v.wgrad().staged);
  // A 300 x 300 f32 plane (2 x 363 KB) fits no shared memory: no staged variant, and the heuristic
  // keeps the register tiles from global memory.
  DwConvArgs large = a;
  large.h = large.w = 300;
  const Problem pl = dwconv::make_problem(large);
  CHECK(reason(pl, h) == "shared memory");
  for (const auto& v : dwconv::enumerate(pl)) CHECK_FALSE(v.wgrad().staged);
  const dwconv::WgradConfig hl = dwconv::heuristic_config(pl, 8).wgrad();
  CHECK_FALSE(hl.staged);
  CHECK(hl.rows_per_thread == 2);
  // 1D: no staged variants (one row a plane).
  DwConvArgs one = args_1d(DwDirection::backward_weight, DwLayout::ncl, 4, 1, 1);
  one.n = 8, one.c = 64, one.w = 4096;
  const Problem p1 = dwconv::make_problem(one);
  for (const auto& v : dwconv::enumerate(p1)) CHECK_FALSE(v.wgrad().staged);
  dwconv::WgradConfig one_staged = dwconv::wgrad_config(1, 256, 4, 1, 0, 8, 4, 0);
  one_staged.staged = true;
  CHECK(reason(p1, one_staged) == "staged wgrad: planes of one row");
  // Planes just under the opt-in limit with the block's static partials on top are refused: 2 planes
  // of 54 rows x 536 f32 columns (231,552 bytes <= 232,448) + 8 warps x 50 x 4 bytes (1,600) > 227 KiB.
  DwConvArgs edge = a;
  edge.h = 48, edge.w = 528;  // 12 row groups of 4: 47 + 7 = 54 rows; 66 runs of 8: 65 x 8 + 16 = 536 columns
  dwconv::WgradConfig edge_c = h;
  edge_c.position_threads = 256;
  const Problem pe = dwconv::make_problem(edge);
  CHECK(reason(pe, edge_c) == "shared memory");
  // The model ranks the staged heuristic above the register tiles from global memory on the 7x7.
  dwconv::WgradConfig global = h;
  global.staged = false, global.rows_per_thread = 2, global.splits = 8;
  CHECK(dwconv::predicted_seconds(p, h, 132, 3.0e12) < dwconv::predicted_seconds(p, global, 132, 3.0e12));
  // Every staged variant of a small dilated and strided problem compiles.
  DwConvArgs odd = a;
  odd.n = 3, odd.c = 8, odd.h = 17, odd.w = 20;
  odd.kernel_h = odd.kernel_w = 3;
  odd.dilation_h = odd.dilation_w = 2;
  odd.stride_h = odd.stride_w = 2;
  odd.pad_top = odd.pad_bottom = odd.pad_left = odd.pad_right = 2;
  const Problem po = dwconv::make_problem(odd);
  std::vector<detail::CompileRequest> requests;
  for (const auto& v : dwconv::enumerate(po))
    if (v.wgrad().staged) requests.push_back(dwconv::compile_request(po, v, "sm_90"));
  CHECK(requests.size() >= 8);
  std::vector<detail::CompileRequest> batches;
  test::add_batched(batches, requests, 64);
  test::check_compiled(batches, requests.size());
}

TEST_CASE("rows per thread and large channel-last kernels: variants exist, geometry and names follow", "[dwconv]") {
  // MobileNetV2 3x3 NCHW f32: rows-per-thread variants, each block covering ty x rh output rows.
  DwConvArgs mobile = args_2d(DwDirection::forward, DwLayout::nchw);
  mobile.n = 32, mobile.c = 144, mobile.h = mobile.w = 56;
  const Problem p = dwconv::make_problem(mobile);
  int with_rows = 0;
  for (const auto& config : dwconv::enumerate(p)) {
    const auto* t = tiled_of(config);
    if (t == nullptr || t->rows_per_thread <= 1 || t->flat) continue;  // flat items: their own test
    const dwconv::TiledConfig& c = *t;
    ++with_rows;
    CHECK_FALSE(c.smem_halo);
    CHECK(c.label().find(fmt::format(",rh={}", c.rows_per_thread)) != std::string::npos);
    const auto g = dwconv::geometry(p, config, p.n);
    CHECK(g.grid_y == static_cast<unsigned>((56 + c.threads_y * c.rows_per_thread - 1) / (c.threads_y * c.rows_per_thread)));
    const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
    // RH, then RT, FLAT, EPI and SEQ at their defaults and the shape constants.
    CHECK(Catch::endsWith(name, fmt::format(", {}, 1, 0, 0, 0{}", c.rows_per_thread, shape_tail(p))));
    CHECK(Config::from_json(config.to_json()) == config);
  }
  CHECK(with_rows >= 8);
  // A config stored before rows per thread existed (no "rh") still parses, as one row.
  auto j = Config(dwconv::tiled_config(4, 32, 4, 1, 0, 0, 4)).to_json();
  j.erase("rh");
  CHECK(Config::from_json(j).tiled().rows_per_thread == 1);
  // 1D problems have one row: no rows-per-thread variants.
  for (const auto& c : dwconv::enumerate(dwconv::make_problem(args_1d(DwDirection::forward, DwLayout::ncl, 4, 1, 1))))
    CHECK((tiled_of(c) == nullptr || tiled_of(c)->rows_per_thread == 1));
  // backward_data with stride 2: rows per thread must be a multiple of the stride.
  DwConvArgs strided = mobile;
  strided.direction = DwDirection::backward_data;
  strided.stride_h = strided.stride_w = 2;
  const Problem q = dwconv::make_problem(strided);
  dwconv::TiledConfig c = dwconv::tiled_config(2, 32, 4, 1, 0, 0, 4);
  CHECK(dwconv::is_valid(q, c));
  c.rows_per_thread = 3;
  CHECK_FALSE(dwconv::is_valid(q, c));
  // ConvNeXt-style 31x31 NHWC bf16: the shared-memory filter allows few channels per block, so
  // blocks of 8 rows keep a tiled variant in the space (only the direct kernels ran before).
  const DwConvArgs big = replknet_31x31(DwLayout::nhwc, DType::bf16);
  int tiled = 0;
  for (const auto& v : dwconv::enumerate(dwconv::make_problem(big))) tiled += v.kernel() == dwconv::Kernel::tiled;
  CHECK(tiled >= 1);
}

TEST_CASE("runs per thread (channel-first, one kernel row) and long 1D channel-last runs", "[dwconv][nvrtc]") {
  // Mamba's causal K=4 NCL bf16 [8, 4096, 2048]: runs-per-thread variants, each block covering RT
  // tiles of TX x RW outputs; names close the template with RH = 1 and RT.
  DwConvArgs mamba = args_1d(DwDirection::forward, DwLayout::ncl, 4, 1, 1);
  mamba.dtype = DType::bf16;
  mamba.n = 8, mamba.c = 4096, mamba.w = 2048;
  const Problem p = dwconv::make_problem(mamba);
  int with_runs = 0;
  for (const auto& config : dwconv::enumerate(p)) {
    const auto* t = tiled_of(config);
    if (t == nullptr || t->runs_per_thread <= 1) continue;
    const dwconv::TiledConfig& c = *t;
    ++with_runs;
    INFO(c.label());
    CHECK(c.vector_channels > 1);
    CHECK_FALSE(c.smem_halo);
    CHECK(c.rows_per_thread == 1);
    CHECK(c.label().substr(c.label().size() - 5) == fmt::format(",rt={}", c.runs_per_thread));
    const auto g = dwconv::geometry(p, config, p.n);
    const int tile = c.threads_x * c.outputs_per_thread * c.runs_per_thread;
    CHECK(g.grid_x == static_cast<unsigned>(8 * 4096 * ((2048 + tile - 1) / tile)));
    const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
    CHECK(name.substr(name.size() - 7) == fmt::format(", 1, {}>", c.runs_per_thread));
    CHECK(Config::from_json(config.to_json()) == config);
    CHECK(dwconv::predicted_seconds(p, config, 132, 4.2e12) > 0);
  }
  CHECK(with_runs >= 12);
  // A config stored before runs per thread existed (no "rt"), or with "rt": 0, parses as one run.
  dwconv::TiledConfig c = dwconv::heuristic_config(p, 8).tiled();
  c.runs_per_thread = 4;
  auto j = Config(c).to_json();
  j.erase("rt");
  CHECK(Config::from_json(j).tiled().runs_per_thread == 1);
  dwconv::TiledConfig one = c;
  one.runs_per_thread = 1;
  CHECK(Config(one) == Config::from_json(j));
  j["rt"] = 0;
  CHECK(Config(one) == Config::from_json(j));
  CHECK(one.label() == Config::from_json(j).label());
  // The rules: global-memory halo, one kernel row, one row per thread, at most 8; tuning prunes tiles
  // wider than the row (half the threads idle: 164.6 against 110.3 us on an H100).
  std::string why;
  CHECK(dwconv::is_valid(p, c, &why));
  c.runs_per_thread = 16;
  CHECK_FALSE(dwconv::is_runnable(p, c));
  c.runs_per_thread = 8, c.threads_x = 128, c.outputs_per_thread = 4;
  CHECK(dwconv::is_runnable(p, c));
  CHECK_FALSE(dwconv::is_valid(p, c));  // 128 x 4 x 8 = 4096 outputs a block, rows of 2048
  c.runs_per_thread = 4, c.smem_halo = true, c.vector_channels = 1;
  CHECK_FALSE(dwconv::is_runnable(p, c));
  // 2D problems (kernel rows > 1) have none, in either layout.
  DwConvArgs mobile = args_2d(DwDirection::forward, DwLayout::nchw);
  mobile.n = 32, mobile.c = 144, mobile.h = mobile.w = 56;
  for (const auto& v : dwconv::enumerate(dwconv::make_problem(mobile)))
    CHECK((tiled_of(v) == nullptr || tiled_of(v)->runs_per_thread == 1));
  mobile.layout = DwLayout::nhwc;
  dwconv::TiledConfig last = dwconv::heuristic_config(dwconv::make_problem(mobile), 8).tiled();
  last.runs_per_thread = 2, last.rows_per_thread = 1;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(mobile), last, &why));
  CHECK(why.find("runs per thread") != std::string::npos);
  mobile.layout = DwLayout::nchw;
  // 1D channel-last K=31 bf16 [16, 512, 4096]: runs of 16 and 32 (a 62-value window serves 32
  // outputs); channel-first runs stay at most 16, 2D channel-last runs of 32 do not exist.
  DwConvArgs s4 = args_1d(DwDirection::forward, DwLayout::nlc, 31, 1, 1);
  s4.dtype = DType::bf16;
  s4.n = 16, s4.c = 512, s4.w = 4096;
  s4.causal = false, s4.pad_left = s4.pad_right = 15;
  // Channel-last: no runs per thread (carried windows were tried and lost, bench/NOTES.md); staged
  // tiles take RT tiles a block instead.
  int runs_16 = 0, runs_32 = 0;
  for (const auto& config : dwconv::enumerate(dwconv::make_problem(s4))) {
    const auto* v = tiled_of(config);
    if (v == nullptr) continue;
    runs_16 += v->outputs_per_thread == 16;
    runs_32 += v->outputs_per_thread == 32;
    CHECK((v->runs_per_thread == 1 || v->smem_halo));
  }
  CHECK(runs_16 >= 2);
  CHECK(runs_32 >= 2);
  for (const auto& v : dwconv::enumerate(p)) CHECK((tiled_of(v) == nullptr || tiled_of(v)->outputs_per_thread <= 16));
  // Every runs-per-thread variant of both problems and of their backward_data twins compiles (the
  // compile sweep's rows of 96 are too short for channel-first ones).
  CHECK(compile_selected({mamba, s4}, [](const Config& v) {
          return tiled_of(v) != nullptr && (tiled_of(v)->runs_per_thread > 1 || tiled_of(v)->outputs_per_thread > 16);
        }) >= 40);
  DwConvArgs nhwc = mobile;
  nhwc.layout = DwLayout::nhwc;
  for (const auto& v : dwconv::enumerate(dwconv::make_problem(nhwc)))
    CHECK((tiled_of(v) == nullptr || tiled_of(v)->outputs_per_thread <= 16));
}

// S4ConvD's long kernels (K = 63, NLC f32 [16, 256, 4096], "same" padding): windows over 64 registers
// where a thread holds nothing else (channel-last rows from global memory, one row a thread; 1D
// register-tiled weight gradients), not where staged tiles, rows per thread or the fused forms
// compete for them. Before, only runs of 2 were valid: 735 us forward and 2,030 us weight gradient on
// an H200, against 108 and 179 with these (bench/NOTES.md, "long 1D kernels").
TEST_CASE("long 1D kernels: windows over 64 registers where nothing else holds registers", "[dwconv][nvrtc][heavy]") {
  DwConvArgs a = args_1d(DwDirection::forward, DwLayout::nlc, 63, 1, 1);
  a.n = 16, a.c = 256, a.w = 4096;
  a.causal = false, a.pad_left = a.pad_right = 31;
  a.bias = fake(6 << 20);
  const Problem fwd = dwconv::make_problem(a);
  const auto window = [](const Problem& p, int rw) {
    return dwconv::sizes::window(static_cast<int>(p.direction), p.kw, p.sw, p.dw, p.pad_left, rw);
  };
  int long_tiled = 0;
  for (const auto& v : dwconv::enumerate(fwd)) {
    const auto* t = tiled_of(v);
    if (t == nullptr || window(fwd, t->outputs_per_thread) * t->vector_channels <= dwconv::sizes::kMaxWindowRegisters) continue;
    ++long_tiled;
    INFO(v.label());
    CHECK_FALSE(t->smem_halo);
    CHECK(t->rows_per_thread == 1);
    CHECK(window(fwd, t->outputs_per_thread) * t->vector_channels <= dwconv::sizes::kMaxLongWindowRegisters);
    CHECK(t->outputs_per_thread * t->vector_channels <= 64);
  }
  CHECK(long_tiled >= 8);
  // The heuristic: runs of 32 from global memory, taps in registers (the exhaustive winner).
  const dwconv::TiledConfig h = dwconv::heuristic_config(fwd, 8).tiled();
  CHECK(h.outputs_per_thread == 32);
  CHECK(h.vector_channels == 1);
  CHECK_FALSE(h.smem_halo);
  CHECK_FALSE(h.smem_filter);
  CHECK(Config(h).label() == "tiled,rw=32,tx=64,ty=1,vc=1,halo=global,filter=reg");  // the H200 winner
  // The same run as a staged tile stays refused (its window is held beside the tile's copies).
  dwconv::TiledConfig staged = dwconv::tiled_config(32, 32, 4, 1, 1, 0, 1, 1);
  std::string why;
  CHECK_FALSE(dwconv::is_runnable(fwd, staged, &why));
  CHECK(why.find("register window") != std::string::npos);
  // seq_idx keeps the 64-register window: causal K = 31 f32, runs of 32 in pairs of channels (124).
  DwConvArgs causal = args_1d(DwDirection::forward, DwLayout::nlc, 31, 1, 1);
  causal.n = 2, causal.c = 64, causal.w = 4096;
  const dwconv::TiledConfig pairs = dwconv::tiled_config(32, 32, 1, 2, 0, 0, 1, 1);
  CHECK(dwconv::is_runnable(dwconv::make_problem(causal), pairs));
  causal.seq_idx = static_cast<const std::int32_t*>(fake(8 << 20));
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(causal), pairs, &why));
  // Weight gradient: register tiles of 4, 8 and 16 with every tap; the heuristic takes 16 on 8
  // channels x 32 run threads.
  a.direction = DwDirection::backward_weight;
  a.bias = nullptr, a.dbias = fake(7 << 20);
  const Problem wg = dwconv::make_problem(a);
  std::set<int> runs;
  for (const auto& v : dwconv::enumerate(wg))
    if (const auto* w = std::get_if<dwconv::WgradConfig>(&v.variant()); w != nullptr && w->outputs_per_thread > 1) {
      runs.insert(w->outputs_per_thread);
      CHECK(w->taps_per_block == 63);
    }
  CHECK(runs == std::set<int>{4, 8, 16});
  const dwconv::WgradConfig hw = dwconv::heuristic_config(wg, 8).wgrad();
  CHECK(hw.outputs_per_thread == 16);
  CHECK(hw.taps_per_block == 63);
  CHECK(hw.channels_per_block == 8);
  CHECK(hw.position_threads == 32);
  CHECK(hw.splits == 8);  // one block an SM: the exhaustive winner's 8 (179 us; 32 splits took 211)
  CHECK(Config(hw).label() == "wgrad,ct=8,py=32,tg=63,split=8,reduce=ordered,rw=16");  // the H200 winner
  // 2D register tiles (here one kernel row of a 3 x 63 kernel a block column) keep the 64-register window.
  DwConvArgs two_d = args_2d(DwDirection::backward_weight, DwLayout::nchw);
  two_d.kernel_h = 3, two_d.kernel_w = 63, two_d.w = 200, two_d.pad_left = two_d.pad_right = 31;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(two_d), dwconv::wgrad_config(1, 128, 63, 1, 0, 8, 1, 1), &why));
  // Every long-window tiled variant of the problem and its backward_data twin compiles.
  CHECK(compile_selected({[&] { DwConvArgs f = a; f.direction = DwDirection::forward; f.dbias = nullptr; return f; }()},
                         [&](const Config& v) {
                           const auto* t = tiled_of(v);
                           return t != nullptr && window(fwd, t->outputs_per_thread) * t->vector_channels >
                                                      dwconv::sizes::kMaxWindowRegisters;
                         }) >= 16);
}

TEST_CASE("dwconv flat items: channel-first 2D planes without idle tile lanes", "[dwconv][nvrtc]") {
  // ConvNeXt 7x7 NCHW f32 [32, 96, 56, 56]: tiles of 64 x 32 cover a 56 x 56 plane with 64 x 64
  // lanes (23 % idle); flat items (plane, RH rows, run of RW) over the whole grid leave only the
  // last block's tail idle.
  const DwConvArgs convnext = convnext_7x7(DwLayout::nchw, DType::f32);
  const Problem p = dwconv::make_problem(convnext);
  int flat = 0;
  for (const auto& config : dwconv::enumerate(p)) {
    const auto* t = tiled_of(config);
    if (t == nullptr || !t->flat) continue;
    const dwconv::TiledConfig& c = *t;
    ++flat;
    INFO(c.label());
    CHECK(c.threads_y == 1);
    CHECK(c.threads_x % 32 == 0);
    CHECK_FALSE(c.smem_halo);
    CHECK_FALSE(c.smem_filter);
    CHECK(c.runs_per_thread == 1);
    CHECK(c.label().substr(c.label().size() - 5) == ",flat");
    const int rh = c.rows_per_thread, rw = c.outputs_per_thread;
    const std::int64_t items = 32 * 96 * ((56 + rh - 1) / rh) * ((56 + rw - 1) / rw);
    const auto g = dwconv::geometry(p, config, p.n);
    CHECK(g.grid_x == static_cast<unsigned>((items + c.threads_x - 1) / c.threads_x));
    CHECK(g.grid_y == 1u);
    CHECK(g.dynamic_smem == 0u);
    const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
    CHECK(Catch::endsWith(name, fmt::format(", {}, 1, 1, 0, 0, 96, 56, 56, 56, 56>", rh)));
    CHECK(Config::from_json(config.to_json()) == config);
    // The same thread's work as a tile of one row of threads idles lanes; the model sees them.
    dwconv::TiledConfig tiled = c;
    tiled.flat = false;
    if (dwconv::is_runnable(p, tiled)) CHECK(dwconv::predicted_seconds(p, config, 132, 3e12) < dwconv::predicted_seconds(p, tiled, 132, 3e12));
  }
  CHECK(flat >= 20);
  // A config stored before flat items existed (no "flat") parses as tiles.
  const dwconv::TiledConfig c = dwconv::flat_config(4, 128, 4, 4);
  CHECK(dwconv::is_valid(p, c));
  auto j = Config(c).to_json();
  CHECK(j.at("flat") == 1);
  j.erase("flat");
  CHECK_FALSE(Config::from_json(j).tiled().flat);
  CHECK(Config::from_json(j) != c);
  // The rules: channel-first, global halo, taps in registers, one run, whole warps in one row.
  std::string why;
  for (auto change : std::initializer_list<std::function<void(dwconv::TiledConfig&)>>{
           [](dwconv::TiledConfig& v) { v.smem_filter = true; },
           [](dwconv::TiledConfig& v) { v.smem_halo = true, v.vector_channels = 1, v.rows_per_thread = 1; },
           [](dwconv::TiledConfig& v) { v.threads_x = 64, v.threads_y = 2; }, [](dwconv::TiledConfig& v) { v.threads_x = 48; }}) {
    dwconv::TiledConfig bad = c;
    change(bad);
    why.clear();
    CHECK_FALSE(dwconv::is_runnable(p, bad, &why));
    CHECK(why.find("flat items") != std::string::npos);
  }
  // Only the tiled kernel has flat items: another kernel's stored config naming them is refused.
  nlohmann::json direct = {{"kernel", "direct"}, {"coalesced", 1}, {"flat", 1}};
  CHECK_THROWS_WITH(Config::from_json(direct), Catch::Contains("field 'flat' is not a direct config's"));
  direct["flat"] = 0;  // a file of the single struct the types replaced: zeros in the other kernels' fields
  CHECK(Config::from_json(direct) == Config(dwconv::DirectConfig{true}));
  // The heuristic of 2D channel-first kernels up to 64 taps is flat (rows and vectors as the problem
  // allows: 2 output rows take 2 rows a thread, stride 3 backward_data none, W = 54 2-element vectors).
  CHECK(dwconv::heuristic_config(p, 8).label() == "tiled,rw=4,tx=128,ty=1,vc=4,halo=global,filter=reg,rh=4,flat");
  DwConvArgs low = convnext;
  low.h = 2, low.kernel_h = 1, low.pad_top = low.pad_bottom = 0;
  CHECK(dwconv::heuristic_config(dwconv::make_problem(low), 8).label() == "tiled,rw=4,tx=128,ty=1,vc=4,halo=global,filter=reg,rh=2,flat");
  DwConvArgs strided = convnext;
  strided.direction = DwDirection::backward_data, strided.stride_h = strided.stride_w = 3;
  strided.h = strided.w = 57;
  const dwconv::TiledConfig s3 = dwconv::heuristic_config(dwconv::make_problem(strided), 8).tiled();
  CHECK(s3.flat);
  CHECK(s3.rows_per_thread == 1);
  DwConvArgs odd = convnext;
  odd.w = 54;
  CHECK(dwconv::heuristic_config(dwconv::make_problem(odd), 8).label() == "tiled,rw=4,tx=128,ty=1,vc=2,halo=global,filter=reg,rh=4,flat");
  DwConvArgs last = convnext;
  last.layout = DwLayout::nhwc;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(last), dwconv::flat_config(4, 128, 1, 4), &why));
  CHECK(why.find("flat items") != std::string::npos);
  // 1D rows: runnable, not tuned (whole tiles already); the 32-bit item index is bounded.
  DwConvArgs mamba = args_1d(DwDirection::forward, DwLayout::ncl, 4, 1, 1);
  mamba.n = 8, mamba.c = 4096, mamba.w = 2048;
  const Problem one_d = dwconv::make_problem(mamba);
  CHECK(dwconv::is_runnable(one_d, dwconv::flat_config(4, 128, 4, 0)));
  CHECK_FALSE(dwconv::is_valid(one_d, dwconv::flat_config(4, 128, 4, 0)));
  for (const auto& v : dwconv::enumerate(one_d)) CHECK((tiled_of(v) == nullptr || !tiled_of(v)->flat));
  DwConvArgs huge = convnext;
  huge.n = 4096, huge.c = 4096;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(huge), dwconv::flat_config(1, 64, 1, 0), &why));
  CHECK(why.find("32-bit") != std::string::npos);
  // Every flat variant of 3x3 and 7x7, forward and backward_data, compiles for sm_90.
  DwConvArgs mobile = convnext;
  mobile.c = 144, mobile.kernel_h = mobile.kernel_w = 3;
  mobile.pad_top = mobile.pad_bottom = mobile.pad_left = mobile.pad_right = 1;
  CHECK(compile_selected({convnext, mobile}, [](const Config& v) { return tiled_of(v) != nullptr && tiled_of(v)->flat; }) >= 80);
}

TEST_CASE("dwconv staged channel-last tiles: the source tile in shared memory", "[dwconv][nvrtc][heavy]") {
  // ConvNeXt 7x7 NHWC bf16 [32, 96, 56, 56]: a tile is TX * VC channels x TY runs of RW x RH rows,
  // its source [rows][columns][channels] copied to shared memory; RT tiles a block.
  const DwConvArgs convnext = convnext_7x7(DwLayout::nhwc, DType::bf16);
  const Problem p = dwconv::make_problem(convnext);
  int staged = 0;
  for (const auto& config : dwconv::enumerate(p)) {
    const auto* t = tiled_of(config);
    if (t == nullptr || !t->smem_halo) continue;
    const dwconv::TiledConfig& c = *t;
    ++staged;
    INFO(c.label());
    const int ct = c.threads_x * c.vector_channels, rh = c.rows_per_thread, rw = c.outputs_per_thread;
    CHECK((ct == 32 || ct == 64));
    CHECK(c.threads_x * c.threads_y >= 64);
    CHECK(c.threads_x * c.threads_y <= 256);
    CHECK(c.smem_filter == (49 * c.vector_channels > 64));
    CHECK(c.label().find("halo=smem") != std::string::npos);
    const int rt = c.runs_per_thread;  // tiles a block
    CHECK((rt == 1 || rt == 4));
    const auto g = dwconv::geometry(p, config, p.n);
    const std::int64_t tiles = (96 + ct - 1) / ct * 32 * ((56 + rh - 1) / rh) * ((56 + c.threads_y * rw - 1) / (c.threads_y * rw));
    CHECK(g.grid_x == static_cast<unsigned>((tiles + rt - 1) / rt));
    CHECK(g.grid_y == 1u);
    // bf16 tiles, two buffers with tiles per block; f32 taps.
    const std::size_t tile = std::size_t(rh + 6) * std::size_t(c.threads_y * rw + 6) * ct * 2 * (rt > 1 ? 2 : 1);
    CHECK(g.dynamic_smem == tile + (c.smem_filter ? 49 * ct * 4 : 0));
    CHECK(g.dynamic_smem <= 96 * 1024);
    CHECK(Config::from_json(config.to_json()) == config);
    const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
    CHECK(name.find(fmt::format(", {}, {}, {}, 1, {}, 0", c.threads_x, c.threads_y, c.vector_channels, int(c.smem_filter))) != std::string::npos);
    // RH, RT, then FLAT, EPI, SEQ at their defaults and the shape constants (Problem::fixed_shape).
    CHECK(Catch::endsWith(name, fmt::format(", {}, {}, 0, 0, 0, 96, 56, 56, 56, 56>", rh, rt)));
  }
  CHECK(staged >= 20);
  // The rules: 16-byte copies, backward_data rows a multiple of the stride, shared memory within the
  // opt-in limit; pruned: under 32 channels a block (bank conflicts), kernels over 64 taps.
  std::string why;
  DwConvArgs narrow = convnext;
  narrow.c = 12;  // 24 bytes a position: no 16-byte copies
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(narrow), dwconv::tiled_config(4, 32, 2, 1, 1, 0, 4), &why));
  CHECK(why.find("16-byte") != std::string::npos);
  DwConvArgs misaligned = convnext;
  misaligned.x = fake(2);
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(misaligned), dwconv::tiled_config(4, 32, 2, 1, 1, 0, 4), &why));
  CHECK(why.find("16-byte") != std::string::npos);
  DwConvArgs strided = convnext;
  strided.direction = DwDirection::backward_data, strided.stride_h = strided.stride_w = 2;
  const Problem s2 = dwconv::make_problem(strided);
  CHECK_FALSE(dwconv::is_runnable(s2, dwconv::tiled_config(4, 32, 2, 1, 1, 0, 1), &why));
  CHECK(why.find("stride_h") != std::string::npos);
  CHECK(dwconv::is_runnable(s2, dwconv::tiled_config(4, 32, 2, 1, 1, 0, 2)));
  const Problem large = dwconv::make_problem(replknet_31x31(DwLayout::nhwc, DType::bf16));
  CHECK_FALSE(dwconv::is_runnable(large, dwconv::tiled_config(2, 64, 4, 1, 1, 1, 1), &why));  // 961 taps x 64 channels
  CHECK(why == "shared memory");
  CHECK_FALSE(dwconv::is_runnable(p, dwconv::tiled_config(8, 32, 2, 1, 1, 0, 8), &why));
  CHECK(why.find("16 copies") != std::string::npos);
  DwConvArgs wide = convnext;
  wide.dtype = DType::f32;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(wide), dwconv::tiled_config(4, 8, 4, 3, 1, 1, 4), &why));  // 3 channels a thread
  CHECK(why.find("vector width") != std::string::npos);
  CHECK(dwconv::is_runnable(p, dwconv::tiled_config(4, 16, 8, 1, 1, 0, 4)));
  CHECK_FALSE(dwconv::is_valid(p, dwconv::tiled_config(4, 16, 8, 1, 1, 0, 4), &why));
  CHECK(why.find("32 channels") != std::string::npos);
  for (const auto& v : dwconv::enumerate(large)) CHECK((tiled_of(v) == nullptr || !tiled_of(v)->smem_halo));
  // The heuristic of channel-last 2D kernels of 10-64 taps: 16-bit types take tensor-core tiles, f32
  // staged tiles (4 tiles a block; more runs where two exceed 16 copies a thread, within 96 KiB); 3x3
  // kernels and channels without 16-byte copies keep the global-memory rule.
  // Tensor-core tiles of 16 rows x one run of 8 * nt columns: the fewest n-tiles whose tiles cover a
  // row in as many tiles as runs of 64 would (56 columns: 7; 28: 4; 112: two tiles of 7; 96: two of 6).
  CHECK(dwconv::heuristic_config(p, 8).label() == "mma,cb=16,tr=16,nt=7,warps=8");
  for (const auto& [width, nt] : std::vector<std::pair<std::int64_t, int>>{{28, 4}, {112, 7}, {200, 7}, {64, 8}, {96, 6}}) {
    DwConvArgs w = convnext;
    w.w = width;
    INFO(width);
    CHECK(dwconv::heuristic_config(dwconv::make_problem(w), 8).label() == fmt::format("mma,cb=16,tr=16,nt={},warps=8", nt));
  }
  DwConvArgs small_plane = convnext;
  small_plane.dtype = DType::f32, small_plane.c = 384, small_plane.h = small_plane.w = 14;
  const Problem sp = dwconv::make_problem(small_plane);
  const Config h14 = dwconv::heuristic_config(sp, 8);
  CHECK(h14.label() == "tiled,rw=4,tx=32,ty=4,vc=1,halo=smem,filter=reg,rh=4,rt=4");
  CHECK(dwconv::geometry(sp, h14, 1).dynamic_smem <= 96 * 1024);
  DwConvArgs three = convnext;
  three.kernel_h = three.kernel_w = 3;
  three.pad_top = three.pad_bottom = three.pad_left = three.pad_right = 1;
  CHECK_FALSE(dwconv::heuristic_config(dwconv::make_problem(three), 8).tiled().smem_halo);
  CHECK_FALSE(dwconv::heuristic_config(dwconv::make_problem(narrow), 8).tiled().smem_halo);
  CHECK_FALSE(dwconv::heuristic_config(dwconv::make_problem(misaligned), 8).tiled().smem_halo);
  // Every staged variant of 7x7 bf16 and 3x3 f32 stride 2 (forward and backward_data) and of a 1D
  // K=31 compiles for sm_90.
  DwConvArgs mobile = args_2d(DwDirection::forward, DwLayout::nhwc);
  mobile.n = 32, mobile.c = 96, mobile.h = mobile.w = 112, mobile.stride_h = mobile.stride_w = 2;
  DwConvArgs long_conv = args_1d(DwDirection::forward, DwLayout::nlc, 31, 1, 1);
  long_conv.dtype = DType::bf16, long_conv.c = 512, long_conv.w = 4096;
  // 1D channel-last kernels of 16+ taps: tensor-core tiles for 16-bit types, else staged runs of 32
  // (the longest whose window fits); 15 taps stay below the rule.
  CHECK(dwconv::heuristic_config(dwconv::make_problem(long_conv), 8).label() == "mma,cb=16,tr=1,nt=7,warps=4");
  DwConvArgs long_f32 = long_conv;
  long_f32.dtype = DType::f32;
  CHECK(dwconv::heuristic_config(dwconv::make_problem(long_f32), 8).label() == "tiled,rw=32,tx=32,ty=4,vc=1,halo=smem,filter=reg");
  DwConvArgs k15 = args_1d(DwDirection::forward, DwLayout::nlc, 15, 1, 1);
  k15.dtype = DType::bf16, k15.c = 512, k15.w = 4096;
  CHECK(dwconv::heuristic_config(dwconv::make_problem(k15), 8).kernel() != dwconv::Kernel::mma);
  DwConvArgs long_bwd = long_conv;
  long_bwd.direction = DwDirection::backward_data;  // measured forward only
  CHECK(dwconv::heuristic_config(dwconv::make_problem(long_bwd), 8).kernel() != dwconv::Kernel::mma);
  CHECK(compile_selected({convnext, mobile, long_conv}, [](const Config& v) { return tiled_of(v) != nullptr && tiled_of(v)->smem_halo; }) >= 100);
}

TEST_CASE("dwconv channel-last kernels over 64 taps: runs of 8 and opt-in shared filters", "[dwconv][nvrtc][heavy]") {
  // 31x31 NHWC bf16: with 48 KiB a shared filter holds 8 channels (a warp reads 16-byte halves of
  // sectors); opting in lets 16 and 32 channels share a block, and runs of 8 or 16 share each
  // kernel row's window among more outputs (38 loads for 8, 46 for 16, against 34 for 4).
  const DwConvArgs big = replknet_31x31(DwLayout::nhwc, DType::bf16);
  const Problem p = dwconv::make_problem(big);
  int runs_of_8 = 0, runs_of_16 = 0, opt_in = 0;
  for (const auto& v : dwconv::enumerate(p)) {
    const std::size_t smem = dwconv::geometry(p, v, 1).dynamic_smem;
    CHECK(smem <= 227 * 1024);
    runs_of_8 += tiled_of(v) != nullptr && tiled_of(v)->outputs_per_thread == 8;
    runs_of_16 += tiled_of(v) != nullptr && tiled_of(v)->outputs_per_thread == 16;
    opt_in += smem > 48 * 1024;
  }
  CHECK(runs_of_8 > 0);
  CHECK(runs_of_16 > 0);
  CHECK(opt_in > 0);
  // The heuristic runs on any sm_80+ device: 16-bit tensor-core tiles within 96 KiB, others no opt-in.
  CHECK(dwconv::heuristic_config(p, 8).kernel() == dwconv::Kernel::mma);
  CHECK(dwconv::geometry(p, dwconv::heuristic_config(p, 8), 1).dynamic_smem <= 96 * 1024);
  DwConvArgs big_f32 = big;
  big_f32.dtype = DType::f32;
  const Problem pf = dwconv::make_problem(big_f32);
  CHECK(dwconv::geometry(pf, dwconv::heuristic_config(pf, 8), 1).dynamic_smem <= 48 * 1024);
  // 7x7 (49 taps, registers allowed): no opt-in, no 2D runs of 8 or 16 (staged tiles aside: their
  // source tile may opt in up to 96 KiB, and their runs share it).
  DwConvArgs seven = big;
  seven.kernel_h = seven.kernel_w = 7;
  seven.pad_top = seven.pad_bottom = seven.pad_left = seven.pad_right = 3;
  const Problem q = dwconv::make_problem(seven);
  for (const auto& v : dwconv::enumerate(q)) {
    if (v.kernel() == dwconv::Kernel::mma || (tiled_of(v) != nullptr && tiled_of(v)->smem_halo)) continue;
    CHECK(dwconv::geometry(q, v, 1).dynamic_smem <= 48 * 1024);
    CHECK_FALSE((tiled_of(v) != nullptr && tiled_of(v)->outputs_per_thread >= 8));
  }
  // The new variants compile (a 15x15 keeps NVRTC's time small; the same template paths).
  DwConvArgs mid = big;
  mid.n = 2, mid.c = 32, mid.h = 19, mid.w = 20;
  mid.kernel_h = mid.kernel_w = 15;
  mid.pad_top = mid.pad_bottom = mid.pad_left = mid.pad_right = 7;
  const Problem m = dwconv::make_problem(mid);
  // Each kernel takes NVRTC seconds: with KVTUNE_TEST_NVRTC_EVERY set (the release and ASan stages),
  // one variant per (run length, opt-in) pair; every one in the sweeps stage.
  std::vector<detail::CompileRequest> requests;
  std::set<std::pair<int, bool>> kinds;
  for (const auto& v : dwconv::enumerate(m)) {
    const bool opt_in_smem = dwconv::geometry(m, v, 1).dynamic_smem > 48 * 1024;
    if (tiled_of(v) == nullptr || (tiled_of(v)->outputs_per_thread < 8 && !opt_in_smem)) continue;
    if (!kinds.insert({tiled_of(v)->outputs_per_thread, opt_in_smem}).second && test::nvrtc_every() > 1) continue;
    requests.push_back(dwconv::compile_request(m, v, "sm_90"));
  }
  REQUIRE(requests.size() >= 4);
  std::vector<detail::CompileRequest> batches;
  test::add_batched(batches, requests, 64);
  test::check_compiled(batches, requests.size());
}

TEST_CASE("dwconv heuristic: a tiled variant of the space's own kind on odd shapes, never a seed", "[dwconv]") {
  // Small and odd shapes of each direction and layout: the heuristic must be valid and not fall
  // back to the seed designs (the naive weight gradient is 1 thread a block).
  int checked = 0;
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    for (DwLayout l : {DwLayout::nchw, DwLayout::nhwc})
      for (std::int64_t n : {1, 8})
        for (std::int64_t hw : {7, 14, 64}) {
          DwConvArgs a = args_2d(d, l);
          a.n = n, a.c = 4, a.h = a.w = hw;
          const Problem p = dwconv::make_problem(a);
          INFO(p.key());
          const Config c = dwconv::heuristic_config(p, 8);
          INFO(c.label());
          CHECK(dwconv::is_valid(p, c));
          for (const auto& seed : dwconv::seed_configs(p)) CHECK(c != seed.second);
          ++checked;
        }
  CHECK(checked == 36);
  // Kernels whose register window does not fit even runs of 4 (1D K = 61..63: 67+ values a row; a
  // 3 x 32 kernel with dilation 2) and short rows (W = 4..7, under a run of 8): still a valid heuristic
  // in every direction and layout.
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
      for (int k : {31, 61, 62, 63}) {
        DwConvArgs a = args_1d(d, l, k, 1, 1);
        a.n = 2, a.c = 8, a.w = 300;
        const Problem p = dwconv::make_problem(a);
        INFO(p.key());
        CHECK(dwconv::is_valid(p, dwconv::heuristic_config(p, 8)));
      }
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    for (DwLayout l : {DwLayout::nchw, DwLayout::nhwc}) {
      DwConvArgs wide = args_2d(d, l);
      wide.n = 2, wide.c = 8, wide.h = 20, wide.w = 90;
      wide.kernel_h = 3, wide.kernel_w = 32, wide.dilation_w = 2;
      wide.pad_top = wide.pad_bottom = 1, wide.pad_left = wide.pad_right = 31;
      const Problem pw = dwconv::make_problem(wide);
      INFO(pw.key());
      CHECK(dwconv::is_valid(pw, dwconv::heuristic_config(pw, 8)));
      for (std::int64_t w : {4, 5, 6, 7}) {
        DwConvArgs small = args_2d(d, l);
        small.n = 2, small.c = 8, small.h = 9, small.w = w;
        const Problem ps = dwconv::make_problem(small);
        INFO(ps.key());
        const Config c = dwconv::heuristic_config(ps, 8);
        CHECK(dwconv::is_valid(ps, c));
        // Channel-first weight gradients keep register tiling (runs of 4) where a row holds one.
        if (d == DwDirection::backward_weight && l == DwLayout::nchw) CHECK(c.wgrad().outputs_per_thread == 4);
      }
    }
}

TEST_CASE("dwconv heuristic for kernels over 64 taps: long runs, 8 x 8 threads, shared memory within 48 KiB", "[dwconv]") {
  // The measured winners of the 31x31 benchmark shapes: NHWC bf16 tensor-core tiles of 8 channels, 16
  // rows x runs of 56 (H100 probe, 115.8 us; runs of 16 before, 909 us on an H200, and before them one
  // output a thread, 7,018 us), NCHW f32 runs of 8 with the halo tile and the filter in shared memory (367 us against 1,571).
  // Tensor-core tiles may take up to 96 KiB (every sm_80+ device gives a block 99 KiB).
  DwConvArgs a = replknet_31x31(DwLayout::nhwc, DType::bf16);
  CHECK(dwconv::heuristic_config(dwconv::make_problem(a), 8).label() == "mma,cb=8,tr=16,nt=7,warps=8");
  a.dtype = DType::f32;
  CHECK(dwconv::heuristic_config(dwconv::make_problem(a), 8).label() == "tiled,rw=16,tx=8,ty=8,vc=1,halo=global,filter=smem");
  a.dtype = DType::bf16;
  a.layout = DwLayout::nchw, a.dtype = DType::f32;
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data}) {
    a.direction = d;
    CHECK(dwconv::heuristic_config(dwconv::make_problem(a), 8).label() == "tiled,rw=8,tx=8,ty=8,vc=1,halo=smem,filter=smem");
  }
  // Other large kernels, small planes, strides: valid, never a seed, within 48 KiB of shared memory.
  int checked = 0;
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data})
    for (DwLayout l : {DwLayout::nchw, DwLayout::nhwc})
      for (DType t : {DType::f32, DType::bf16})
        for (int k : {9, 31})
          for (std::int64_t hw : {14, 56})
            for (int stride : {1, 2}) {
              a.direction = d, a.layout = l, a.dtype = t;
              a.n = 4, a.c = 96, a.h = a.w = hw;
              a.kernel_h = a.kernel_w = k;
              a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = k / 2;
              a.stride_h = a.stride_w = stride;
              const Problem p = dwconv::make_problem(a);
              INFO(p.key());
              const Config c = dwconv::heuristic_config(p, 8);
              INFO(c.label());
              CHECK(dwconv::is_valid(p, c));
              CHECK(dwconv::geometry(p, c, p.n).dynamic_smem <= (c.kernel() == dwconv::Kernel::mma ? 96 : 48) * 1024);
              for (const auto& seed : dwconv::seed_configs(p)) CHECK(c != seed.second);
              ++checked;
            }
  CHECK(checked == 64);
}

TEST_CASE("dwconv tensor-core tiles: space, rules, geometry, names, compile", "[dwconv][nvrtc]") {
  // ConvNeXt 7x7 NHWC bf16 [32, 96, 56, 56]: 16 segments of 8 * NT outputs (TR rows x 16 / TR runs) of
  // CB channels a block; one plane [rows][pitch] a channel, the taps [CB][KH][KW + 1].
  const DwConvArgs convnext = convnext_7x7(DwLayout::nhwc, DType::bf16);
  const Problem p = dwconv::make_problem(convnext);
  int tiles = 0;
  for (const auto& config : dwconv::enumerate(p)) {
    if (config.kernel() != dwconv::Kernel::mma) continue;
    const dwconv::MmaConfig& c = config.mma();
    ++tiles;
    INFO(c.label());
    CHECK((c.channels_per_block == 16 || c.channels_per_block == 32));
    CHECK((c.tile_rows == 16 || c.tile_rows == 8 || c.tile_rows == 4));
    CHECK(Config::from_json(config.to_json()) == config);
    const int tile_w = 16 / c.tile_rows * 8 * c.segment_tiles;
    // Computed outputs nobody stores: at most 28 % of the tiles.
    CHECK(56.0 * 56.0 / double((56 + tile_w - 1) / tile_w * tile_w * ((56 + c.tile_rows - 1) / c.tile_rows * c.tile_rows)) >= 0.72);
    const auto g = dwconv::geometry(p, config, p.n);
    CHECK(g.block == unsigned(32 * c.warps));
    CHECK(g.grid_x == unsigned(96 / c.channels_per_block * 32 * ((56 + c.tile_rows - 1) / c.tile_rows) * ((56 + tile_w - 1) / tile_w)));
    // 7 taps: an n-tile's window is 14 columns, one 16-column step; the plane pitch is 8 mod 16.
    const int columns = (16 / c.tile_rows - 1) * tile_w / (16 / c.tile_rows) + (c.segment_tiles - 1) * 8 + 16;
    const int pitch = (columns + 7) / 16 * 16 + 8;
    CHECK(pitch % 16 == 8);
    // Groups of 8 planes 16 elements further than the last (32 with two groups: bank-conflict-free
    // staging); 7 taps a row and a zero.
    const int pad = (c.channels_per_block / 8 - 1) * (c.channels_per_block == 16 ? 32 : 16);
    CHECK(g.dynamic_smem == std::size_t((c.channels_per_block * ((c.tile_rows + 6) * pitch + 7 * 8) * 2 + pad * 2 + 15) / 16 * 16));
    const auto name = dwconv::compile_request(p, config, "sm_90").name_expressions.at(0);
    // ... HAS_BIAS, EPI = 0, then the shape constants (Problem::fixed_shape): C, source and destination planes.
    CHECK(name == fmt::format("kvt_dwconv_mma<kvt_bf16, 1, 0, 7, 7, 1, 1, 1, 1, 3, 3, {}, {}, {}, {}, {}, 0, 0, 96, 56, 56, 56, 56>",
                              c.channels_per_block, c.tile_rows, c.segment_tiles, c.warps, pitch));
  }
  CHECK(tiles >= 40);
  CHECK(dwconv::mma_config(16, 16, 7, 4).label() == "mma,cb=16,tr=16,nt=7,warps=4");
  // The rules: 16-bit types, channel-last, 16-byte loads, backward_data with stride 1.
  std::string why;
  const Config tile = dwconv::mma_config(16, 16, 7, 4);
  CHECK(dwconv::is_runnable(p, tile));
  DwConvArgs f32 = convnext;
  f32.dtype = DType::f32;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(f32), tile, &why));
  CHECK(why.find("16-bit") != std::string::npos);
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(convnext_7x7(DwLayout::nchw, DType::bf16)), tile, &why));
  CHECK(why.find("channel-last") != std::string::npos);
  DwConvArgs narrow = convnext;
  narrow.c = 12;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(narrow), tile, &why));
  CHECK(why.find("16-byte") != std::string::npos);
  DwConvArgs strided = convnext;
  strided.direction = DwDirection::backward_data, strided.stride_h = strided.stride_w = 2;
  CHECK_FALSE(dwconv::is_runnable(dwconv::make_problem(strided), tile, &why));
  CHECK(why.find("stride 1") != std::string::npos);
  strided.direction = DwDirection::forward;
  CHECK(dwconv::is_runnable(dwconv::make_problem(strided), tile));
  CHECK_FALSE(dwconv::is_runnable(p, dwconv::mma_config(16, 3, 7, 4), &why));
  CHECK_FALSE(dwconv::is_runnable(p, dwconv::mma_config(12, 16, 7, 4), &why));
  CHECK_FALSE(dwconv::is_runnable(p, dwconv::mma_config(16, 16, 7, 3), &why));
  // Another kernel's fields cannot be set on a tile; a stored config that has them is refused.
  nlohmann::json mixed = Config(tile).to_json();
  mixed["rw"] = 4;
  CHECK_THROWS_WITH(Config::from_json(mixed), Catch::Contains("field 'rw' is not a mma config's"));
  nlohmann::json stray = Config(dwconv::tiled_config(4, 32, 2, 1, 0, 0, 4)).to_json();
  stray["warps"] = 4;
  CHECK_THROWS_WITH(Config::from_json(stray), Catch::Contains("field 'warps' is not a tiled config's"));
  stray["warps"] = 0;
  CHECK(Config::from_json(stray) == Config(dwconv::tiled_config(4, 32, 2, 1, 0, 0, 4)));
  stray["bogus"] = 0;
  CHECK_THROWS_WITH(Config::from_json(stray), Catch::Contains("unknown field 'bogus'"));
  // A tile is no backward_weight variant; reading a config as another kernel's is a bug, not a variant.
  DwConvArgs weights = convnext;
  weights.direction = DwDirection::backward_weight;
  const Problem wp = dwconv::make_problem(weights);
  CHECK_FALSE(dwconv::is_runnable(wp, tile, &why));
  CHECK(why == "backward_weight uses the wgrad kernel");
  CHECK_THROWS_WITH(Config(tile).wgrad(), Catch::Contains("a mma config read as a wgrad one"));
  // 64 channels a block (outside the space, allowed by the rules for imported configs): 8 plane groups,
  // 112 elements of offsets, no plane overlapping the next.
  const Config wide_block = dwconv::mma_config(64, 16, 7, 8);
  CHECK(dwconv::is_runnable(p, wide_block));
  CHECK(dwconv::geometry(p, wide_block, 1).dynamic_smem == std::size_t((64 * (22 * 72 + 7 * 8) + 112) * 2));
  // 1D: 16 runs of one row; 31 taps: three 16-column steps an n-tile.
  DwConvArgs long_conv = args_1d(DwDirection::forward, DwLayout::nlc, 31, 1, 1);
  long_conv.dtype = DType::bf16, long_conv.c = 512, long_conv.w = 4096;
  long_conv.causal = false, long_conv.pad_left = long_conv.pad_right = 15;
  const Problem lp = dwconv::make_problem(long_conv);
  int one_d = 0;
  for (const auto& c : dwconv::enumerate(lp))
    if (c.kernel() == dwconv::Kernel::mma) {
      ++one_d;
      CHECK(c.mma().tile_rows == 1);
    }
  CHECK(one_d >= 16);
  const Config run = dwconv::mma_config(32, 1, 2, 4);  // 16 runs of 16: 15 * 16 + 8 + 48 = 296 columns
  CHECK(dwconv::geometry(lp, run, lp.n).dynamic_smem == std::size_t((32 * 296 + 48 + 32 * 32) * 2));
  CHECK(dwconv::is_valid(lp, run));
  CHECK_FALSE(dwconv::is_valid(lp, dwconv::mma_config(32, 2, 2, 4), &why));
  // 31x31: the largest tiles still fit the opt-in shared memory.
  const Problem large = dwconv::make_problem(replknet_31x31(DwLayout::nhwc, DType::bf16));
  int large_tiles = 0;
  for (const auto& c : dwconv::enumerate(large)) large_tiles += c.kernel() == dwconv::Kernel::mma;
  CHECK(large_tiles >= 20);
  // A sample of tiles compiles for sm_90 (forward and backward_data): both 16-bit types, 1D and 2D,
  // stride and dilation, bias, 31 taps.
  DwConvArgs f16 = convnext;
  f16.dtype = DType::f16, f16.stride_h = f16.stride_w = 2, f16.dilation_h = 2, f16.bias = fake(6 << 20);
  long_conv.bias = fake(6 << 20);
  std::size_t i = 0;
  CHECK(compile_selected({convnext, f16, long_conv, replknet_31x31(DwLayout::nhwc, DType::bf16)}, [&i](const Config& v) {
          return v.kernel() == dwconv::Kernel::mma && i++ % 7 == 0;
        }) >= 10);
}
