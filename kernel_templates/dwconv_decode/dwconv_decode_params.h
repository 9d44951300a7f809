// Kernel arguments of the dwconv_decode family: one struct, passed by value, with the same layout in
// host code and in the NVRTC program (this file is compiled by both). Tensors are dense.
#pragma once

struct KvtDwConvDecodeParams {
  const void* x;             // [batch, channels, seqlen] (seqlen 1: [batch, channels])
  const void* weight;        // [channels, K]
  const void* bias;          // [channels], or null
  void* y;                   // x's shape
  void* state;               // [state_slots, channels, state_len], updated in place
  const int* cache_seqlens;  // [batch]: the position of each row's first new token (circular state), or null
  const int* state_indices;  // [batch]: the state slot of each row (negative: padding), or null
  long long batch;
  long long channels;
  long long state_len;
  long long state_slots;
};
