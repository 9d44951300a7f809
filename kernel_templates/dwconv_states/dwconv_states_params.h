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
