// Host stand-in for kernel_templates/common.cuh, for tests/test_dwconv_states_emulated.cpp: the f32
// pieces of the device basics the dwconv_states kernel uses, and CUDA's thread model as host threads
// (one std::thread per CUDA thread of a block, __syncthreads a barrier, blocks one after another).
#pragma once
#include <pthread.h>

#include <cmath>

struct KvtEmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline KvtEmulatedDim3 blockIdx;
inline thread_local KvtEmulatedDim3 threadIdx;
inline pthread_barrier_t kvt_emulated_barrier;
inline void __syncthreads() { pthread_barrier_wait(&kvt_emulated_barrier); }

inline float kvt_to_float(float v) { return v; }
template <class T, int N> struct alignas(sizeof(T) * N) Vec {
  T v[N];
};
template <class T> inline T kvt_from_float(float f) { return f; }
inline float __expf(float v) { return std::exp(v); }
inline float __fdividef(float a, float b) { return a / b; }
using std::erf;
using std::erff;
using std::exp;
using std::fmaf;
using std::tanh;
