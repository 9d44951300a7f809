// Host stand-in for kernel_templates/common.cuh, for the kernels the tests compile as host C++
// (tests/test_dwconv_states_emulated.cpp, tests/test_normalize_emulated.cpp): the f32 pieces of the
// device basics, and CUDA's thread model as host threads (one std::thread per CUDA thread of a block,
// __syncthreads a barrier, a warp's shuffles an exchange through a per-warp slot array between two
// barriers of its lanes, blocks one after another).
#pragma once
#include <pthread.h>
#include <vector_types.h>  // float4, as the device code names it

#include <algorithm>
#include <atomic>
#include <cmath>

struct KvtEmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline KvtEmulatedDim3 blockIdx, gridDim, blockDim;
inline thread_local KvtEmulatedDim3 threadIdx;
inline pthread_barrier_t kvt_emulated_barrier;
inline void __syncthreads() { pthread_barrier_wait(&kvt_emulated_barrier); }

// Warps: lanes threadIdx.x % 32 of warp threadIdx.x / 32 (blocks of one dimension). Every lane of a
// warp calls each shuffle (the kernels' full-mask shuffles), so two barriers of the warp's lanes
// bracket the exchange. kvt_emulated_warps_init sets them up for a block size.
struct KvtEmulatedWarp {
  pthread_barrier_t barrier;
  double slot[32];
};
inline KvtEmulatedWarp kvt_emulated_warps[32];
inline void kvt_emulated_warps_init(unsigned block) {
  for (unsigned w = 0; w < (block + 31) / 32; ++w)
    pthread_barrier_init(&kvt_emulated_warps[w].barrier, nullptr, std::min(32u, block - 32 * w));
}
inline void kvt_emulated_warps_destroy(unsigned block) {
  for (unsigned w = 0; w < (block + 31) / 32; ++w) pthread_barrier_destroy(&kvt_emulated_warps[w].barrier);
}
template <class T, class Lane>
T kvt_emulated_exchange(T v, Lane source) {
  KvtEmulatedWarp& w = kvt_emulated_warps[threadIdx.x / 32];
  const int lane = int(threadIdx.x % 32);
  w.slot[lane] = double(v);
  pthread_barrier_wait(&w.barrier);
  const int from = source(lane);
  const T r = T(w.slot[from >= 0 && from < 32 ? from : lane]);
  pthread_barrier_wait(&w.barrier);
  return r;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int mask) {
  return kvt_emulated_exchange(v, [mask](int lane) { return lane ^ mask; });
}
template <class T> T __shfl_sync(unsigned, T v, int src) {
  return kvt_emulated_exchange(v, [src](int) { return src; });
}
template <class T> T __shfl_down_sync(unsigned, T v, unsigned delta) {
  return kvt_emulated_exchange(v, [delta](int lane) { return lane + int(delta); });
}

inline float kvt_to_float(float v) { return v; }
template <class T, int N> struct alignas(sizeof(T) * N) Vec {
  T v[N];
};
template <class T> inline T kvt_from_float(float f) { return f; }
// bf16 storage as the device converts it: the upper half of the f32, rounded to nearest even.
struct kvt_bf16 {
  unsigned short bits;
};
inline float kvt_to_float(kvt_bf16 v) {
  const unsigned u = unsigned(v.bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
template <> inline kvt_bf16 kvt_from_float<kvt_bf16>(float f) {
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<unsigned short>((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<unsigned short>(u >> 16)};
}
inline float __expf(float v) { return std::exp(v); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float rsqrtf(float v) { return 1.f / std::sqrt(v); }
template <class T> T __ldcg(const T* p) { return *p; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline long long clock64() { return 0; }
inline void __nanosleep(unsigned) {}
inline void __trap() { std::abort(); }
using std::erf;
using std::erff;
using std::exp;
using std::fmaf;
using std::max;
using std::min;
using std::sqrt;
using std::tanh;

// Dynamic shared memory: one buffer, blocks run one at a time.
alignas(16) inline unsigned char kvt_emulated_dynamic_smem[256 * 1024];
#define KVT_DYNAMIC_SMEM(name) unsigned char* const name = kvt_emulated_dynamic_smem
