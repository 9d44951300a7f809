// Kernel arguments of the dwconv_states family: one struct, passed by value, with the same layout in
// host code and in the NVRTC program (this file is compiled by both). Tensors are dense.
//   forward (and an activation's gradient prep): src = x, dst = y (prep: its workspace), aux = dy (prep),
//                    state_out = final_state
//   backward_data:   src = dy (or the prepped gradient), dst = dx, state_out = dinitial_state
//   backward_weight: src = x, aux = dy (or the prepped gradient), dst = dweight (corrected in place)
#pragma once

struct KvtDwConvStatesParams {
  const void* src;
  void* dst;
  const void* weight;         // [channels, K]
  const void* bias;           // [channels] (forward), or null
  const void* aux;
  const void* initial_state;  // [batch, channels, S], or null
  void* state_out;            // [batch, channels, S], or null
  const int* seq_idx;         // [batch, length], or null
  long long batch;
  long long channels;
  long long length;
  long long chunks;           // position chunks of P a row whose outputs may need fixing (host: geometry())
};

// Thread groups of the weight gradient's correction (direction 2): R groups of BLOCK threads
// (threadIdx.y) walk a row's chunks side by side, so more than one warp of these latency-bound walks
// runs on an SM: one block walks every row of its channels, so the groups are the walk's parallelism.
// Up to 1024 threads a block for states of up to 4 inputs (256 beyond: a thread keeps its taps, its
// correction and a batch of 4 positions' loads, 6 K registers, and 1024 threads leave 64 each), the
// groups' seq_idx windows and marks
// within 40 KiB of shared memory; 1 for the other directions. Host (geometry) and kernel use this one
// definition.
constexpr int kvt_states_groups(int dir, int block, int positions, int state, int seq) {
  const int threads = state <= 4 ? 1024 : 256;
  int groups = dir == 2 && block < threads ? threads / block : 1;
  const int window = (seq ? positions + state : 1) * 4 + positions;
  while (groups > 1 && groups * window > 40960) groups /= 2;
  return groups;
}
