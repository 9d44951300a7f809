// The dwconv_states kernel (kernel_templates/dwconv_states/dwconv_states.cu) compiled as host C++ and
// run on emulated CUDA threads (tests/emulation/common.cuh: f32 only, a block's threads as host threads
// meeting at a barrier, blocks in turn), from the plain convolution's result to the whole operation's,
// against the float64 reference: every direction and option, both layouts, dilation, partial channel
// blocks and several chunks a row. It checks the kernel's logic on machines without a GPU; the [gpu]
// tests check the compiled kernel in every dtype.
#include <catch2/catch.hpp>

#include <random>
#include <thread>
#include <vector>

#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_reference.h"
#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"

#include "emulation/values.h"
#include "emulation/kernel_begin.h"
#include "kernel_templates/dwconv_states/dwconv_states.cu"
#include "emulation/kernel_end.h"

using namespace kvtune;

namespace {

template <int CL, int DIR, int K, int D, int EPI, int BIAS, int INIT, int STATE, int SEQ, int BLOCK, int P>
void launch_emulated(const KvtDwConvStatesParams& p, const dwconv_states::Geometry& g) {
  REQUIRE(g.block == unsigned(BLOCK));
  const int groups = kvt_states_groups(DIR, BLOCK, P, (K - 1) * D, SEQ);
  REQUIRE(g.block_y == unsigned(groups));
  pthread_barrier_init(&kvt_emulated_barrier, nullptr, unsigned(BLOCK * groups));
  for (unsigned by = 0; by < g.grid_y; ++by)
    for (unsigned bx = 0; bx < g.grid_x; ++bx) {
      blockIdx.x = bx, blockIdx.y = by;
      std::vector<std::thread> threads;
      for (int t = 0; t < BLOCK * groups; ++t)
        threads.emplace_back([&p, t] {
          threadIdx.x = unsigned(t % BLOCK), threadIdx.y = unsigned(t / BLOCK);
          kvt_dwconv_states<float, CL, DIR, K, D, EPI, BIAS, INIT, STATE, SEQ, BLOCK, P>(p);
        });
      for (auto& t : threads) t.join();
    }
  pthread_barrier_destroy(&kvt_emulated_barrier);
}

std::vector<double> values(std::size_t n, unsigned seed) { return kvt_emulated_values(n, seed); }

double worst(const std::vector<float>& got, const std::vector<double>& want) {
  double m = 0;
  for (std::size_t i = 0; i < want.size(); ++i) m = std::max(m, std::fabs(double(got[i]) - want[i]));
  return m;
}

template <int CL, int DIR, int K, int D, int EPI, int BIAS, int INIT, int STATE, int SEQ, int BLOCK, int P>
void check() {
  dwconv_states::Problem pr;
  pr.direction = DwDirection(DIR), pr.layout = CL ? DwLayout::nlc : DwLayout::ncl, pr.n = 3, pr.c = 37, pr.w = 101;
  pr.k = K, pr.d = D, pr.bias = BIAS, pr.activation = Activation(EPI & 7), pr.gradient_prep = EPI >= 8;
  pr.initial_state = INIT, pr.state_out = STATE, pr.seq_idx = SEQ;
  INFO(pr.key() << " bt=" << BLOCK << ",p=" << P);
  const std::int64_t n = pr.n, s = pr.state_len(), tensor = n * pr.c * pr.w;
  const auto x = values(std::size_t(tensor), 1), w = values(std::size_t(pr.c * K), 2), g = values(std::size_t(tensor), 4);
  const auto bias = BIAS ? values(std::size_t(pr.c), 3) : std::vector<double>{};
  const auto init = INIT ? values(std::size_t(n * pr.c * s), 5) : std::vector<double>{};
  const auto seq = SEQ ? dwconv_states::packed_seq_idx(n, pr.w, 4, 6) : std::vector<std::int32_t>{};
  std::vector<double> plain, full, state, dbias;
  if (DIR == 0) {
    plain = dwconv_states::reference_forward(pr, n, x, w, bias, {}, {}, g, nullptr);
    full = dwconv_states::reference_forward(pr, n, x, w, bias, init, seq, g, STATE ? &state : nullptr);
  } else if (DIR == 1) {
    plain = dwconv_states::reference_backward_data(pr, n, g, w, {}, nullptr);
    full = dwconv_states::reference_backward_data(pr, n, g, w, seq, STATE ? &state : nullptr);
  } else {
    dwconv_states::reference_backward_weight(pr, n, x, g, {}, {}, plain, dbias);
    dwconv_states::reference_backward_weight(pr, n, x, g, init, seq, full, dbias);
  }
  const std::vector<float> fx(x.begin(), x.end()), fw(w.begin(), w.end()), fb(bias.begin(), bias.end());
  const std::vector<float> fg(g.begin(), g.end()), fi(init.begin(), init.end());
  std::vector<float> dst(plain.begin(), plain.end()), out_state(std::size_t(n * pr.c * s), NAN);
  KvtDwConvStatesParams p{};
  p.src = DIR == 1 ? fg.data() : fx.data(), p.dst = dst.data(), p.weight = fw.data();
  p.bias = BIAS ? fb.data() : nullptr, p.aux = fg.data(), p.initial_state = INIT ? fi.data() : nullptr;
  p.state_out = STATE ? out_state.data() : nullptr, p.seq_idx = SEQ ? seq.data() : nullptr;
  p.batch = n, p.channels = pr.c, p.length = pr.w;
  const auto geometry = dwconv_states::geometry(pr, dwconv_states::Config{BLOCK, P}, n);
  p.chunks = geometry.chunks;
  if (DIR != 1 || SEQ) REQUIRE(worst(dst, full) > 1e-2);  // the plain result differs where the options act
  launch_emulated<CL, DIR, K, D, EPI, BIAS, INIT, STATE, SEQ, BLOCK, P>(p, geometry);
  CHECK(worst(dst, full) < 2e-5);
  if (STATE) CHECK(worst(out_state, state) < 1e-5);
}

}  // namespace

TEST_CASE("dwconv_states kernel on emulated threads: forward and gradient prep", "[dwconv][states][emulated]") {
  check<0, 0, 4, 1, 0, 1, 1, 1, 0, 32, 32>();    // NCL, initial and final state
  check<1, 0, 4, 2, 1, 1, 1, 1, 0, 32, 32>();    // NLC, silu, dilation 2
  check<1, 0, 4, 1, 0, 0, 0, 1, 1, 32, 32>();    // seq_idx, the last sequence's state
  check<0, 0, 3, 2, 2, 1, 0, 1, 1, 64, 128>();   // gelu tanh, dilation 2, a partial channel block
  check<0, 0, 4, 1, 9, 1, 1, 0, 0, 32, 32>();    // gradient prep of silu, initial state
  check<1, 0, 4, 1, 11, 1, 0, 0, 1, 32, 128>();  // gradient prep of gelu erf, seq_idx
  check<0, 0, 4, 1, 9, 1, 0, 0, 1, 512, 32>();   // gradient prep of silu, seq_idx, one block of 512 channels
}

TEST_CASE("dwconv_states kernel on emulated threads: backward_data and backward_weight", "[dwconv][states][emulated]") {
  check<0, 1, 4, 1, 0, 0, 0, 1, 0, 32, 32>();    // d initial_state
  check<1, 1, 4, 3, 0, 0, 0, 1, 0, 64, 32>();    // d initial_state, dilation 3
  check<0, 1, 4, 1, 0, 0, 0, 0, 1, 32, 32>();    // dx with seq_idx
  check<1, 1, 3, 2, 0, 0, 0, 0, 1, 32, 128>();
  check<0, 1, 4, 1, 0, 0, 0, 0, 1, 1024, 128>();  // dx with seq_idx, one block of 1024 channels
  check<0, 2, 4, 1, 0, 0, 1, 0, 0, 32, 32>();    // dweight with the initial state's taps
  check<1, 2, 4, 2, 0, 0, 1, 0, 0, 64, 32>();
  check<0, 2, 4, 1, 0, 0, 0, 0, 1, 32, 128>();   // dweight with seq_idx
  check<1, 2, 2, 1, 0, 0, 0, 0, 1, 32, 512>();
  check<0, 2, 4, 1, 0, 0, 0, 0, 1, 64, 32>();    // dweight with seq_idx, 16 groups of 64 (1024 threads)
}
