// kvtune depthwise causal conv1d decode step (dwconv_decode family), compiled by NVRTC: the outputs
// of SEQ new tokens per batch row from a state of the row's previous inputs, and the state updated in
// place. One variant, kvt_dwconv_decode, over these template parameters:
//   T      storage type (float, kvt_f16, kvt_bf16); f32 accumulation
//   K      taps; SEQ new tokens per row (both from the problem)
//   ALIGN  bytes every tensor pointer is aligned to (problem): the widest vector a chunk may use
//   CIRC   0: the state is the last K - 1 inputs, shifted by SEQ; 1: a circular buffer of state_len
//          inputs, input position q at q % state_len, the row's next position in cache_seqlens
//   IDX    1: state_indices picks each row's state slot (negative: padding, nothing written)
//   BIAS, ACT (dwconv_activation.cuh: 0 none, 1 silu, 2 gelu tanh, 3 gelu erf, 4 relu)
//   EARLY  1: weight, bias and state_indices are read before griddepcontrol.wait (overlap_prologue)
//   BLOCK  threads per block; VC channels per thread; TT tokens per thread (the config)
// A block serves one batch row: CVB = BLOCK / G threads along channel vectors times G = ceil(SEQ / TT)
// token groups, channel vectors fastest (CVB * G threads are launched). Every thread loads its window (the K - 1 inputs before its
// first token and its tokens' inputs) into registers; with G > 1 the block synchronizes before any
// state is written, since the groups of one channel read what another group writes. Contiguous
// chunks (a thread's weights, state entries, and with G = 1 its inputs and outputs) move as the
// widest vectors ALIGN and the chunk's length allow.
// A row whose state index is >= state_slots, or whose cache_seqlens entry is negative, gets NaN
// outputs and leaves the state alone: device data cannot throw, so the error shows in y.
#include "common.cuh"
#include "dwconv_params.h"      // KvtDwConvParams, which dwconv_activation.cuh's epilogue names
#include "dwconv_activation.cuh"
#include "dwconv_decode_params.h"

// The widest vector (elements) for a chunk of N elements of T at a multiple of N elements.
template <class T, int N, int ALIGN> __host__ __device__ constexpr int kvt_decode_vector() {
  int v = 1;
  while (v * 2 * int(sizeof(T)) <= ALIGN && v * 2 * int(sizeof(T)) <= 16 && N % (v * 2) == 0) v *= 2;
  return v;
}

template <class T, int N, int ALIGN> __device__ __forceinline__ void kvt_load_chunk(const T* src, float (&out)[N]) {
  constexpr int V = kvt_decode_vector<T, N, ALIGN>();
#pragma unroll
  for (int i = 0; i < N; i += V) {
    const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(src + i);
#pragma unroll
    for (int u = 0; u < V; ++u) out[i + u] = kvt_to_float(v.v[u]);
  }
}

template <class T, int N, int ALIGN> __device__ __forceinline__ void kvt_store_chunk(T* dst, const float (&in)[N]) {
  constexpr int V = kvt_decode_vector<T, N, ALIGN>();
#pragma unroll
  for (int i = 0; i < N; i += V) {
    Vec<T, V> v;
#pragma unroll
    for (int u = 0; u < V; ++u) v.v[u] = kvt_from_float<T>(in[i + u]);
    *reinterpret_cast<Vec<T, V>*>(dst + i) = v;
  }
}

// The wait of a programmatic dependent launch (dwconv_decode::launch starts sm_90 binaries so): the
// grid may be resident before the stream's previous kernel ends; after this it sees all that kernel
// wrote. Letting the stream's next kernel start at once costs nothing: it waits in turn for this
// grid to end before it reads what this one writes.
__device__ __forceinline__ void kvt_wait_for_previous_kernel() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class T, int K, int SEQ, int ALIGN, int CIRC, int IDX, int BIAS, int ACT, int EARLY, int BLOCK, int VC, int TT>
__global__ void __launch_bounds__(BLOCK) kvt_dwconv_decode(KvtDwConvDecodeParams p) {
  constexpr int G = (SEQ + TT - 1) / TT;  // token groups
  constexpr int CVB = BLOCK / G;          // channel vectors per block
  constexpr int H = K - 1;                // inputs before a token its window reaches back
  constexpr int W = TT + H;               // a thread's window
  static_assert(G <= BLOCK && K >= 2, "a block holds every token group of its channel vectors");
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if constexpr (EARLY == 0) kvt_wait_for_previous_kernel();
  const long long vectors = p.channels / VC;
  const long long blocks_per_row = (vectors + CVB - 1) / CVB;
  const long long b = blockIdx.x / blocks_per_row;
  const long long cv = (blockIdx.x % blocks_per_row) * CVB + threadIdx.x % CVB;
  const int g = threadIdx.x / CVB;
  const int t0 = g * TT;
  const bool active = cv < vectors;
  const long long c0 = cv * VC;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  T* state = static_cast<T*>(p.state);

  // The window: win[u][i] is combined position t0 + i of channel c0 + u, where combined positions
  // 0 .. H-1 are the H inputs before the first new token and H + t is new token t.
  float win[VC][W];
  float taps[VC * K];
  float bias[VC];
  if (active) {
    kvt_load_chunk<T, VC * K, ALIGN>(static_cast<const T*>(p.weight) + c0 * K, taps);
#pragma unroll
    for (int u = 0; u < VC; ++u) bias[u] = 0.0f;
    if constexpr (BIAS == 1) kvt_load_chunk<T, VC, ALIGN>(static_cast<const T*>(p.bias) + c0, bias);
  }
  // The row's state slot, issued with the loads above so that their latencies overlap (the state's
  // address depends on it).
  int s = 0;
  if constexpr (IDX == 1) s = p.state_indices[b];
  if constexpr (EARLY == 1) kvt_wait_for_previous_kernel();
  if (active) {
    if constexpr (G == 1) {
      float in[VC * SEQ];
      kvt_load_chunk<T, VC * SEQ, ALIGN>(x + (b * p.channels + c0) * SEQ, in);
#pragma unroll
      for (int u = 0; u < VC; ++u)
#pragma unroll
        for (int t = 0; t < SEQ; ++t) win[u][H + t] = in[u * SEQ + t];
    } else {
#pragma unroll
      for (int u = 0; u < VC; ++u)
#pragma unroll
        for (int i = 0; i < W; ++i) {
          const int t = t0 + i - H;  // new token of window position i
          win[u][i] = t >= 0 && t < SEQ ? kvt_to_float(x[(b * p.channels + c0 + u) * SEQ + t]) : 0.0f;
        }
    }
  }

  // The row's first position, read after the loads above were issued; the whole block agrees on
  // the slot and position: returns are uniform.
  long long slot = b;
  bool broken = false;
  if constexpr (IDX == 1) {
    if (s < 0) return;  // padding: nothing written
    broken = s >= p.state_slots;
    slot = s;
  }
  long long pos0 = 0;
  if constexpr (CIRC == 1) {
    pos0 = p.cache_seqlens[b];
    broken = broken || pos0 < 0;
  }
  if (broken) {
    if (active)
#pragma unroll
      for (int u = 0; u < VC; ++u)
#pragma unroll
        for (int i = 0; i < TT; ++i)
          if (t0 + i < SEQ) y[((b * p.channels) + c0 + u) * SEQ + t0 + i] = kvt_from_float<T>(__int_as_float(0x7fc00000));
    return;
  }

  if (active && t0 < H) {  // the window reaches into the state
    if constexpr (CIRC == 0) {
      float old[VC * H];
      kvt_load_chunk<T, VC * H, ALIGN>(state + (slot * p.channels + c0) * H, old);
#pragma unroll
      for (int u = 0; u < VC; ++u)
#pragma unroll
        for (int i = 0; i < W; ++i)
          if (t0 + i < H) win[u][i] = old[u * H + t0 + i];
    } else {
#pragma unroll
      for (int u = 0; u < VC; ++u)
#pragma unroll
        for (int i = 0; i < W; ++i) {
          const long long q = pos0 - H + t0 + i;  // input position; before 0: zero (a fresh sequence)
          if (t0 + i < H)
            win[u][i] = q >= 0 ? kvt_to_float(state[(slot * p.channels + c0 + u) * p.state_len + q % p.state_len]) : 0.0f;
        }
    }
  }
  if constexpr (G > 1) __syncthreads();  // every read of the state before any write
  if (!active) return;

  float out[VC][TT];
#pragma unroll
  for (int u = 0; u < VC; ++u)
#pragma unroll
    for (int i = 0; i < TT; ++i) {
      float z = bias[u];
#pragma unroll
      for (int k = 0; k < K; ++k) z = fmaf(taps[u * K + k], win[u][i + k], z);
      out[u][i] = kvt_act_value<ACT>(z);
    }
  if constexpr (G == 1) {
    float flat[VC * SEQ];
#pragma unroll
    for (int u = 0; u < VC; ++u)
#pragma unroll
      for (int t = 0; t < SEQ; ++t) flat[u * SEQ + t] = out[u][t];
    kvt_store_chunk<T, VC * SEQ, ALIGN>(y + (b * p.channels + c0) * SEQ, flat);
  } else {
#pragma unroll
    for (int u = 0; u < VC; ++u)
#pragma unroll
      for (int i = 0; i < TT; ++i)
        if (t0 + i < SEQ) y[(b * p.channels + c0 + u) * SEQ + t0 + i] = kvt_from_float<T>(out[u][i]);
  }

  // The state update.
  if constexpr (CIRC == 0) {
    // The new state is combined positions SEQ .. SEQ + H - 1, all inside the last group's window.
    if (g == G - 1) {
      float next[VC * H];
#pragma unroll
      for (int u = 0; u < VC; ++u)
#pragma unroll
        for (int j = 0; j < H; ++j) next[u * H + j] = win[u][SEQ + j - (G - 1) * TT];
      kvt_store_chunk<T, VC * H, ALIGN>(state + (slot * p.channels + c0) * H, next);
    }
  } else {
    // Each thread stores its own tokens' inputs at their positions (SEQ <= state_len: no two collide).
#pragma unroll
    for (int u = 0; u < VC; ++u)
#pragma unroll
      for (int i = 0; i < TT; ++i)
        if (t0 + i < SEQ)
          state[(slot * p.channels + c0 + u) * p.state_len + (pos0 + t0 + i) % p.state_len] =
              kvt_from_float<T>(win[u][H + i]);
  }
}
