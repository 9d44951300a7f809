// kvtune states and packed sequences of the causal depthwise conv1d (dwconv_states family), compiled by
// NVRTC. The tuned dwconv kernel runs unchanged (zeros before position 0, windows across sequence
// boundaries); this fix-up then rewrites only what those options change. One kernel, kvt_dwconv_states:
//   T      storage type (float, kvt_f16, kvt_bf16); f32 accumulation
//   CL     0: NCL, 1: NLC;  K taps, D dilation, S = (K - 1) * D inputs of state
//   DIR    0 forward: recompute the outputs whose window reaches the initial state (t < S) or crosses a
//            seq_idx change, with EPI (dwconv_activation.cuh: act(z), or the gradient prep dy * act'(z));
//            STATE: write the final state (the last S inputs of [initial_state, x])
//          1 backward_data: recompute dx where a tap reaches into another sequence; STATE: d initial_state
//          2 backward_weight: add to dweight what the plain kernel missed (taps that read the initial
//            state) or counted wrongly (taps across a sequence boundary); one block per BLOCK channels
//            walks every row in order (deterministic, no workspace)
//   BIAS, INIT (initial state read), SEQ (seq_idx read)
//   BLOCK  threads per block, one channel each; P positions a block's chunk decides on at once (config)
// DIR 0 / 1: block (row n, chunk) of grid.x, channels by grid.y; chunk index `chunks` of a row writes the
// state. A chunk marks its positions that need fixing in shared memory (K seq_idx compares each); the
// block then walks the marked ones, every thread recomputing its channel there, four positions at a
// time (their loads in flight together; the weight gradient's correction too).
#include "common.cuh"
#include "dwconv_params.h"  // KvtDwConvParams, which dwconv_activation.cuh's epilogue names
#include "dwconv_activation.cuh"
#include "dwconv_states_params.h"

template <int CL>
__device__ __forceinline__ long long kvt_states_index(const KvtDwConvStatesParams& p, long long n, long long c, long long t) {
  return CL ? (n * p.length + t) * p.channels + c : (n * p.channels + c) * p.length + t;
}

// Whether position t of the chunk starting at t0 needs its output recomputed. seq holds the seq_idx of
// positions t0 - S .. t0 + P - 1 (DIR 0, 2) or t0 .. t0 + P + S - 1 (DIR 1).
template <int DIR, int K, int D, int INIT, int SEQ>
__device__ __forceinline__ bool kvt_states_marked(const int* seq, long long t, long long t0, long long length) {
  constexpr int S = (K - 1) * D;
  if (DIR != 1 && INIT && t < S) return true;
  if constexpr (SEQ == 1) {
#pragma unroll
    for (int k = 0; k < K - 1; ++k) {
      const int lag = (K - 1 - k) * D;
      if constexpr (DIR == 1) {
        if (t + lag < length && seq[t + lag - t0] != seq[t - t0]) return true;
      } else {
        if (t - lag >= 0 && seq[t - lag - t0 + S] != seq[t - t0 + S]) return true;
      }
    }
  }
  return false;
}

// Loads seq_idx of the chunk's window into shared memory and marks its positions; returns whether any is.
template <int DIR, int K, int D, int INIT, int SEQ, int BLOCK, int P>
__device__ __forceinline__ bool kvt_states_mark_chunk(const KvtDwConvStatesParams& p, long long n, long long t0, int* seq,
                                                      unsigned char* marked, int* any) {
  constexpr int S = (K - 1) * D;
  __syncthreads();  // every thread is done with the last chunk's marks (DIR 2 walks chunks in turn)
  if (threadIdx.x == 0) *any = 0;
  if constexpr (SEQ == 1) {
    // Every load of the window issued before the first store: one memory latency a chunk, not one
    // a BLOCK positions (DIR 2 walks a row's chunks in turn, so these latencies add up).
    constexpr int kLoads = (P + S + BLOCK - 1) / BLOCK;
    const long long first = DIR == 1 ? t0 : t0 - S;
    int v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int i = threadIdx.x + j * BLOCK;
      const long long t = first + i;
      v[j] = i < P + S && t >= 0 && t < p.length ? p.seq_idx[n * p.length + t] : 0;
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j)
      if (threadIdx.x + j * BLOCK < P + S) seq[threadIdx.x + j * BLOCK] = v[j];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < P; i += BLOCK) {
    const long long t = t0 + i;
    const bool m = t < p.length && kvt_states_marked<DIR, K, D, INIT, SEQ>(seq, t, t0, p.length);
    marked[i] = m;
    if (m) *any = 1;
  }
  __syncthreads();
  return *any != 0;
}

// The marks of positions i0 .. i0 + U - 1 of a chunk into m; whether any is marked.
template <int U>
__device__ __forceinline__ bool kvt_states_batch(const unsigned char* marked, int i0, bool (&m)[U]) {
  bool any = false;
#pragma unroll
  for (int u = 0; u < U; ++u) m[u] = marked[i0 + u], any = any || m[u];
  return any;
}

// Input q of channel c as the output at t sees it: x, or the initial state before 0, or zero across a
// sequence boundary (SEQ: seq_q and seq_t are seq_idx[q] and seq_idx[t], which the callers read from
// the chunk's window in shared memory, so that no global load sits between a tap and its input).
template <class T, int CL, int K, int D, int INIT, int SEQ>
__device__ __forceinline__ float kvt_states_input(const KvtDwConvStatesParams& p, long long n, long long c, long long q,
                                                  int seq_q, int seq_t) {
  constexpr int S = (K - 1) * D;
  if (q < 0) {
    if constexpr (INIT == 1) return kvt_to_float(static_cast<const T*>(p.initial_state)[(n * p.channels + c) * S + S + q]);
    return 0.0f;
  }
  if constexpr (SEQ == 1)
    if (seq_q != seq_t) return 0.0f;
  return kvt_to_float(static_cast<const T*>(p.src)[kvt_states_index<CL>(p, n, c, q)]);
}

template <class T, int CL, int DIR, int K, int D, int EPI, int BIAS, int INIT, int STATE, int SEQ, int BLOCK, int P>
__global__ void __launch_bounds__(BLOCK * kvt_states_groups(DIR, BLOCK, P, (K - 1) * D, SEQ))
    kvt_dwconv_states(KvtDwConvStatesParams p) {
  constexpr int S = (K - 1) * D;
  constexpr int R = kvt_states_groups(DIR, BLOCK, P, S, SEQ);  // thread groups (threadIdx.y)
  constexpr int U = 4;  // marked positions a thread fixes at once
  static_assert(K >= 2 && P % 32 == 0 && P % U == 0, "a state of at least one input; whole warps of positions");
  __shared__ int seq_of[R][SEQ ? P + S : 1];
  __shared__ unsigned char marked_of[R][P];
  __shared__ int any_of[R];
  int* seq = seq_of[threadIdx.y];
  unsigned char* marked = marked_of[threadIdx.y];
  int* any = &any_of[threadIdx.y];
  const long long c = static_cast<long long>(blockIdx.y) * BLOCK + threadIdx.x;
  const bool active = c < p.channels;
  const T* weight = static_cast<const T*>(p.weight);
  float taps[K];
#pragma unroll
  for (int k = 0; k < K; ++k) taps[k] = active ? kvt_to_float(weight[c * K + k]) : 0.0f;

  if constexpr (DIR == 2) {
    // The weight gradient's correction: sum over rows and marked positions of g[t] (true - plain input).
    // Group r of the R walks items r, r + R, ... of the (row, chunk) items; every group calls the
    // marking (its barriers) equally often, a group past the last item marks nothing.
    float correction[K - 1];
#pragma unroll
    for (int k = 0; k < K - 1; ++k) correction[k] = 0.0f;
    const T* g = static_cast<const T*>(p.aux);
    const long long items = p.batch * p.chunks;
    for (long long first = 0; first < items; first += R) {
      const long long item = first + threadIdx.y;
      const long long n = item < items ? item / p.chunks : 0;
      const long long t0 = item < items ? (item % p.chunks) * P : p.length;  // past the end: nothing marked
      if (!kvt_states_mark_chunk<DIR, K, D, INIT, SEQ, BLOCK, P>(p, n, t0, seq, marked, any)) continue;
      if (active)
        for (int i0 = 0; i0 < P; i0 += U) {
          // A batch of U positions: the loads of its marked ones issue together (a boundary marks K - 1
          // consecutive positions), then the FMAs, in position and tap order as one at a time.
          bool m[U];
          if (!kvt_states_batch(marked, i0, m)) continue;
          float gt[U], diff[U][K - 1];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int i = i0 + u;
            const long long t = t0 + i;
            const int seq_t = SEQ ? seq[i + S] : 0;
            gt[u] = m[u] ? kvt_to_float(g[kvt_states_index<CL>(p, n, c, t)]) : 0.0f;
#pragma unroll
            for (int k = 0; k < K - 1; ++k) {
              const long long q = t - (K - 1 - k) * D;
              const float plain =
                  m[u] && q >= 0 ? kvt_to_float(static_cast<const T*>(p.src)[kvt_states_index<CL>(p, n, c, q)]) : 0.0f;
              const int seq_q = SEQ ? seq[i + S - (K - 1 - k) * D] : 0;
              diff[u][k] = m[u] ? kvt_states_input<T, CL, K, D, INIT, SEQ>(p, n, c, q, seq_q, seq_t) - plain : 0.0f;
            }
          }
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (m[u])
#pragma unroll
              for (int k = 0; k < K - 1; ++k) correction[k] = fmaf(gt[u], diff[u][k], correction[k]);
        }
    }
    if constexpr (R > 1) {
      // The groups' partial corrections, tap by tap, added in group order (deterministic).
      __shared__ float partial[R][BLOCK];
#pragma unroll
      for (int k = 0; k < K - 1; ++k) {
        __syncthreads();
        partial[threadIdx.y][threadIdx.x] = correction[k];
        __syncthreads();
        if (threadIdx.y == 0) {
          float sum = 0.0f;
#pragma unroll
          for (int r = 0; r < R; ++r) sum += partial[r][threadIdx.x];
          correction[k] = sum;
        }
      }
    }
    if (active && threadIdx.y == 0) {
      T* dw = static_cast<T*>(p.dst);
#pragma unroll
      for (int k = 0; k < K - 1; ++k) dw[c * K + k] = kvt_from_float<T>(kvt_to_float(dw[c * K + k]) + correction[k]);
    }
    return;
  } else {
    const long long per_row = p.chunks + STATE;
    const long long n = blockIdx.x / per_row;
    const long long chunk = blockIdx.x % per_row;
    if (chunk == p.chunks) {
      // The state: thread e of the block's BLOCK x S entries, channel-major like the state itself.
      const long long c0 = static_cast<long long>(blockIdx.y) * BLOCK;
      T* out = static_cast<T*>(p.state_out);
      for (int e = threadIdx.x; e < BLOCK * S; e += BLOCK) {
        const long long ce = c0 + e / S;
        const int j = e % S;
        if (ce >= p.channels) break;
        float v = 0.0f;
        if constexpr (DIR == 0) {
          // Entry j is input L - S + j (before 0: the initial state's), zero when of an earlier sequence.
          const long long q = p.length - S + j;
          const int seq_last = SEQ ? p.seq_idx[n * p.length + p.length - 1] : 0;
          const int seq_q = SEQ && q >= 0 ? p.seq_idx[n * p.length + q] : 0;
          v = kvt_states_input<T, CL, K, D, INIT, SEQ>(p, n, ce, q, seq_q, seq_last);
        } else {
          // d initial_state[j]: the outputs t = j - S + lag that read it through tap k.
#pragma unroll
          for (int k = 0; k < K - 1; ++k) {
            const long long t = j - S + (K - 1 - k) * D;
            if (t >= 0 && t < p.length)
              v = fmaf(kvt_to_float(weight[ce * K + k]),
                       kvt_to_float(static_cast<const T*>(p.src)[kvt_states_index<CL>(p, n, ce, t)]), v);
          }
        }
        out[(n * p.channels + ce) * S + j] = kvt_from_float<T>(v);
      }
      return;
    }
    const long long t0 = chunk * P;
    if (!kvt_states_mark_chunk<DIR, K, D, INIT, SEQ, BLOCK, P>(p, n, t0, seq, marked, any) || !active) return;
    float bias = 0.0f;
    if constexpr (BIAS == 1 && DIR == 0) bias = kvt_to_float(static_cast<const T*>(p.bias)[c]);
    T* dst = static_cast<T*>(p.dst);
    for (int i0 = 0; i0 < P; i0 += U) {
      // A batch of U positions: every load of its marked ones first, then the stores.
      bool m[U];
      if (!kvt_states_batch(marked, i0, m)) continue;
      float v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = i0 + u;
        const long long t = t0 + i;
        if constexpr (DIR == 0) {
          const int seq_t = SEQ ? seq[i + S] : 0;
          float z = bias;
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const int seq_q = SEQ ? seq[i + S - (K - 1 - k) * D] : 0;
            z = fmaf(taps[k], m[u] ? kvt_states_input<T, CL, K, D, INIT, SEQ>(p, n, c, t - (K - 1 - k) * D, seq_q, seq_t) : 0.0f, z);
          }
          if constexpr (kvt_grad_prep(EPI))
            v[u] = m[u] ? kvt_to_float(static_cast<const T*>(p.aux)[kvt_states_index<CL>(p, n, c, t)]) *
                              kvt_act_derivative<kvt_act_of(EPI)>(z)
                        : 0.0f;
          else
            v[u] = kvt_act_value<EPI>(z);
        } else {
          // dx[t] = sum_k w[k] dy[t + lag_k] over the outputs of t's own sequence.
          const int seq_t = SEQ ? seq[i] : 0;
          float sum = 0.0f;
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const long long q = t + (K - 1 - k) * D;
            if (m[u] && q < p.length && (SEQ == 0 || seq[q - t0] == seq_t))
              sum = fmaf(taps[k], kvt_to_float(static_cast<const T*>(p.src)[kvt_states_index<CL>(p, n, c, q)]), sum);
          }
          v[u] = sum;
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (m[u]) dst[kvt_states_index<CL>(p, n, c, t0 + i0 + u)] = kvt_from_float<T>(v[u]);
    }
  }
}
