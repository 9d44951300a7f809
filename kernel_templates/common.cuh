// kvtune device-side basics shared by every kernel family (compiled by NVRTC, never by the host
// compiler). Self-contained on purpose: no CUDA toolkit headers are needed at run time, so a
// deployment needs libnvrtc and nothing else.
//   kvt_f16 / kvt_bf16   16-bit storage types with explicit f32 conversions (cvt PTX, sm_80+)
//   Vec<T, N>            N elements of T as one aligned access of N * sizeof(T) bytes
//   kvt_smem_address     a shared-memory pointer as a 32-bit shared-state-space address
//   kvt_cp_async16       16-byte asynchronous global -> shared copies (sm_80+); kvt_cp_async<4|8|16>
#pragma once

typedef unsigned short kvt_u16;
struct kvt_f16 { kvt_u16 bits; };
struct kvt_bf16 { kvt_u16 bits; };

__device__ __forceinline__ float kvt_to_float(float v) { return v; }
__device__ __forceinline__ float kvt_to_float(kvt_f16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}
__device__ __forceinline__ float kvt_to_float(kvt_bf16 v) {
  return __uint_as_float(static_cast<unsigned>(v.bits) << 16);
}

template <class T> struct KvtConvert;
template <> struct KvtConvert<float> {
  __device__ __forceinline__ static float from(float f) { return f; }
};
template <> struct KvtConvert<kvt_f16> {
  __device__ __forceinline__ static kvt_f16 from(float f) {
    kvt_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
  }
};
template <> struct KvtConvert<kvt_bf16> {
  __device__ __forceinline__ static kvt_bf16 from(float f) {
    kvt_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
  }
};
template <class T> __device__ __forceinline__ T kvt_from_float(float f) { return KvtConvert<T>::from(f); }

template <class T, int N> struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// The block's dynamic shared memory, 16-byte aligned (a macro: the host emulation of the tests,
// tests/emulation/common.cuh, gives it another definition).
#define KVT_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]

// Asynchronous 16-byte copies global -> shared (sm_80+): `full` false writes 16 zero bytes instead
// (src must still be a valid address). Copies issued since the last commit form one group;
// kvt_cp_async_wait<N>() waits until at most N groups are in flight (the caller then syncs the block).
// The 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ unsigned kvt_smem_address(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ void kvt_cp_async16(void* smem_dst, const void* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(kvt_smem_address(smem_dst)), "l"(src), "r"(full ? 16 : 0)
               : "memory");
}
// 4- or 8-byte pieces (cp.async.ca: the 16-byte .cg form bypasses L1, the smaller ones must not).
template <int BYTES> __device__ __forceinline__ void kvt_cp_async(void* smem_dst, const void* src, bool full) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (BYTES == 16) {
    kvt_cp_async16(smem_dst, src, full);
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(kvt_smem_address(smem_dst)), "l"(src), "n"(BYTES),
                 "r"(full ? BYTES : 0)
                 : "memory");
  }
}
__device__ __forceinline__ void kvt_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void kvt_cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// A Vec of 4, 8 or 16 bytes from the lane `delta` below (UP) or above, by 32-bit warp shuffles; every
// lane of the warp must call it.
template <bool UP, class V> __device__ __forceinline__ V kvt_shfl_vec(const V& x, int delta) {
  static_assert(sizeof(V) % 4 == 0, "whole 32-bit words");
  union Words {
    V vec;
    unsigned w[sizeof(V) / 4];
  } in, out;
  in.vec = x;
#pragma unroll
  for (int i = 0; i < int(sizeof(V) / 4); ++i)
    out.w[i] = UP ? __shfl_up_sync(0xffffffffu, in.w[i], delta) : __shfl_down_sync(0xffffffffu, in.w[i], delta);
  return out.vec;
}

__device__ __forceinline__ bool kvt_finite(float f) {
  return (__float_as_uint(f) & 0x7f800000u) != 0x7f800000u;
}

// Verification: compares a candidate's output with the float64 reference (stored as f32).
// acc[0] += sum (out - ref)^2, acc[1] += sum ref^2, acc[2] += elements where out is not finite
// but ref is, or where ref is NaN and out is not (unwritten, poisoned outputs are NaN).
template <class T>
__global__ void kvt_compare(const T* out, long long ld_out, const float* ref, long long ld_ref,
                            long long rows, long long cols, double* acc) {
  double err = 0.0, norm = 0.0, bad = 0.0;
  const long long total = rows * cols;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / cols, c = e % cols;
    const float o = kvt_to_float(out[r * ld_out + c]);
    const float f = ref[r * ld_ref + c];
    if (kvt_finite(f)) {
      if (!kvt_finite(o)) {
        bad += 1.0;
      } else {
        const double d = (double)o - (double)f;
        err += d * d;
        norm += (double)f * (double)f;
      }
    } else if (f != f && o == o) {
      bad += 1.0;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    err += __shfl_xor_sync(0xffffffffu, err, o);
    norm += __shfl_xor_sync(0xffffffffu, norm, o);
    bad += __shfl_xor_sync(0xffffffffu, bad, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(acc, err);
    atomicAdd(acc + 1, norm);
    atomicAdd(acc + 2, bad);
  }
}

// Deterministic pseudo-random fill (counter-based hash, so any element can be generated
// independently): out[i] = offset + scale * u, u uniform in [-1, 1).
__device__ __forceinline__ unsigned long long kvt_mix(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void kvt_fill_random(T* out, long long n, unsigned long long seed, float offset, float scale) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float u = (float)(kvt_mix(seed ^ (unsigned long long)i) >> 40) * (1.0f / 8388608.0f) - 1.0f;
    out[i] = kvt_from_float<T>(offset + scale * u);
  }
}
