// Host stand-in for kernel_templates/common.cuh, for the kernels the tests compile as host C++
// (tests/test_dwconv_states_emulated.cpp, tests/test_dwconv_tiled_emulated.cpp,
// tests/test_normalize_emulated.cpp): the f32 pieces of the device basics, and CUDA's thread model as
// host threads (one std::thread per CUDA thread of a block, __syncthreads a barrier, a warp's shuffles
// an exchange through a per-warp slot array between two barriers of its lanes, cp.async a plain copy,
// blocks one after another: kvt_emulated_launch). The tensor-core kernel is not emulated.
#pragma once
#include <pthread.h>
#include <vector_types.h>  // float4, as the device code names it

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

struct KvtEmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline KvtEmulatedDim3 blockIdx, gridDim, blockDim;
inline thread_local KvtEmulatedDim3 threadIdx;
inline pthread_barrier_t kvt_emulated_barrier;
inline void __syncthreads() { pthread_barrier_wait(&kvt_emulated_barrier); }
// A warp barrier as the whole block's: valid for kernels whose every thread reaches it (the
// normalize forward's; dwconv_mma.cuh's are never run).
inline void __syncwarp(unsigned = 0xffffffffu) { pthread_barrier_wait(&kvt_emulated_barrier); }

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
template <class T> T __shfl_up_sync(unsigned, T v, unsigned delta) {
  return kvt_emulated_exchange(v, [delta](int lane) { return lane - int(delta); });
}
// A Vec from the lane `delta` below (UP) or above, word by word, as common.cuh's.
template <bool UP, class V> V kvt_shfl_vec(const V& x, int delta) {
  static_assert(sizeof(V) % 4 == 0, "whole 32-bit words");
  unsigned in[sizeof(V) / 4], out[sizeof(V) / 4];
  __builtin_memcpy(in, &x, sizeof(V));
  for (int i = 0; i < int(sizeof(V) / 4); ++i)
    out[i] = UP ? __shfl_up_sync(0xffffffffu, in[i], unsigned(delta)) : __shfl_down_sync(0xffffffffu, in[i], unsigned(delta));
  V r;
  __builtin_memcpy(&r, out, sizeof(V));
  return r;
}

inline bool kvt_finite(float f) { return std::isfinite(f); }  // common.cuh's: neither inf nor NaN
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
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float rsqrtf(float v) { return 1.f / std::sqrt(v); }
template <class T> T __ldcg(const T* p) { return *p; }
template <class T> T __ldcs(const T* p) { return *p; }
template <class T> void __stcs(T* p, T v) { *p = v; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline float atomicAdd(float* p, float v) {
  float old, sum;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do sum = old + v;
  while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  return old;
}
inline float __int_as_float(int i) {
  float f;
  __builtin_memcpy(&f, &i, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  return u;
}
inline int4 make_int4(int x, int y, int z, int w) {
  int4 r;
  r.x = x, r.y = y, r.z = z, r.w = w;
  return r;
}
// cp.async as a plain copy at issue (the groups' waits then have nothing left to wait for); `full`
// false writes zeros, as the device's src-size 0 does.
template <int BYTES> void kvt_cp_async(void* smem_dst, const void* src, bool full) {
  if (full) __builtin_memcpy(smem_dst, src, BYTES);
  else __builtin_memset(smem_dst, 0, BYTES);
}
inline void kvt_cp_async16(void* smem_dst, const void* src, bool full) { kvt_cp_async<16>(smem_dst, src, full); }
inline void kvt_cp_async_commit() {}
template <int N> void kvt_cp_async_wait() {}
// The tensor-core kernel (dwconv_mma.cuh) is not emulated: what only it uses aborts.
inline unsigned __byte_perm(unsigned, unsigned, unsigned) { std::abort(); }
inline unsigned kvt_smem_address(const void*) { std::abort(); }
inline int __syncthreads_or(int) { std::abort(); }
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

// Dynamic shared memory: one buffer, blocks run one at a time. kvt_emulated_launch with the launch's
// dynamic shared memory size fills that many bytes with 0xff (NaN as floats) before each block, so
// nothing carries over from a block or variant before, and under AddressSanitizer poisons the rest.
alignas(16) inline unsigned char kvt_emulated_dynamic_smem[256 * 1024];
#define KVT_DYNAMIC_SMEM(name) unsigned char* const name = kvt_emulated_dynamic_smem
#if defined(__SANITIZE_ADDRESS__)
#define KVT_EMULATED_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVT_EMULATED_ASAN 1
#endif
#endif
#ifdef KVT_EMULATED_ASAN
#include <sanitizer/asan_interface.h>
#endif

// Runs body() as the threads of a grid_x x grid_y grid of one-dimensional blocks of `block` threads
// (whole warps: the shuffles' barriers count 32 lanes), one block after another. With the launch's
// dynamic shared memory size (`dynamic_smem` >= 0), that many bytes are filled with 0xff (NaN as
// floats) before each block, so nothing carries over from a block or variant before, and under
// AddressSanitizer the rest of the buffer is poisoned; with -1 the buffer is left as it is.
template <class Body>
void kvt_emulated_launch(unsigned grid_x, unsigned grid_y, unsigned block, long long dynamic_smem, const Body& body) {
  if (block % 32 != 0 || dynamic_smem > static_cast<long long>(sizeof(kvt_emulated_dynamic_smem))) std::abort();
  const bool sized = dynamic_smem >= 0;
  gridDim.x = grid_x, gridDim.y = grid_y, gridDim.z = 1;
  blockDim.x = block, blockDim.y = 1, blockDim.z = 1;
  pthread_barrier_init(&kvt_emulated_barrier, nullptr, block);
  kvt_emulated_warps_init(block);
#ifdef KVT_EMULATED_ASAN
  if (sized)
    ASAN_POISON_MEMORY_REGION(kvt_emulated_dynamic_smem + dynamic_smem,
                              sizeof(kvt_emulated_dynamic_smem) - std::size_t(dynamic_smem));
#endif
  for (unsigned by = 0; by < grid_y; ++by)
    for (unsigned bx = 0; bx < grid_x; ++bx) {
      blockIdx.x = bx, blockIdx.y = by;
      if (sized) std::memset(kvt_emulated_dynamic_smem, 0xff, std::size_t(dynamic_smem));
      std::vector<std::thread> threads;
      for (unsigned t = 0; t < block; ++t)
        threads.emplace_back([&body, t] {
          threadIdx.x = t, threadIdx.y = 0;
          body();
        });
      for (auto& t : threads) t.join();
    }
#ifdef KVT_EMULATED_ASAN
  if (sized) ASAN_UNPOISON_MEMORY_REGION(kvt_emulated_dynamic_smem, sizeof(kvt_emulated_dynamic_smem));
#endif
  kvt_emulated_warps_destroy(block);
  pthread_barrier_destroy(&kvt_emulated_barrier);
}
