// kvtune depthwise convolution epilogues, included by dwconv.cu: what a forward kernel stores for its
// f32 accumulator z = conv(x, w) + bias at output element o (EPI, the kernels' last template argument).
//   EPI 0        z
//   EPI 1 - 4    act(z): 1 silu, 2 gelu (tanh approximation), 3 gelu (erf, exact), 4 relu
//   EPI 9 - 12   gradient prep of activation EPI - 8: dy[o] * act'(z), dy (p.aux) in the output's shape
//                and layout. backward_data and backward_weight with an activation run a forward
//                kernel in this mode into a workspace, then the plain backward kernel on its result:
//                z is recomputed from x, w and bias, so training stores no pre-activation tensor.
// The same functions in double serve the float64 reference kernel. Activations follow PyTorch
// (torch.nn.functional.silu, gelu(approximate='tanh' / 'none'), relu; relu'(z) = 0 for z <= 0).
#pragma once

__host__ __device__ constexpr int kvt_act_of(int epi) { return epi & 7; }
__host__ __device__ constexpr bool kvt_grad_prep(int epi) { return epi >= 8; }

// float: the fast exponential (ex2.approx, a few ulp for the |v| < 20 the activations care about) and
// divisions by a reciprocal; the library's accurate expf / tanhf / IEEE division cost about 30
// instructions an element, enough to make a bf16 Mamba forward 22 % slower than the plain kernel
// (H100, bench/NOTES.md). double (the reference) stays exact.
__device__ __forceinline__ float kvt_exp(float v) { return __expf(v); }
__device__ __forceinline__ double kvt_exp(double v) { return exp(v); }
__device__ __forceinline__ float kvt_div(float a, float b) { return __fdividef(a, b); }  // 0 once |b| > 2^126
__device__ __forceinline__ double kvt_div(double a, double b) { return a / b; }
// tanh v = 1 - 2 / (1 + e^(2v)): -1 and 1 at the ends, absolute error ~1e-7 near 0.
__device__ __forceinline__ float kvt_tanh(float v) { return 1.f - __fdividef(2.f, 1.f + __expf(2.f * v)); }
__device__ __forceinline__ double kvt_tanh(double v) { return tanh(v); }
__device__ __forceinline__ float kvt_erf(float v) { return erff(v); }
__device__ __forceinline__ double kvt_erf(double v) { return erf(v); }

// act(z), F float or double.
template <int ACT, class F> __device__ __forceinline__ F kvt_act_value(F z) {
  constexpr F kHalf = F(0.5), kOne = F(1);
  if constexpr (ACT == 1) {
    return kvt_div(z, kOne + kvt_exp(-z));
  } else if constexpr (ACT == 2) {
    const F u = F(0.7978845608028654) * (z + F(0.044715) * z * z * z);  // sqrt(2 / pi) (z + 0.044715 z^3)
    return kHalf * z * (kOne + kvt_tanh(u));
  } else if constexpr (ACT == 3) {
    return kHalf * z * (kOne + kvt_erf(z * F(0.7071067811865476)));
  } else if constexpr (ACT == 4) {
    return z < F(0) ? F(0) : z;  // NaN passes, as torch.relu
  } else {
    return z;
  }
}

// act'(z).
template <int ACT, class F> __device__ __forceinline__ F kvt_act_derivative(F z) {
  constexpr F kHalf = F(0.5), kOne = F(1);
  if constexpr (ACT == 1) {
    const F s = kvt_div(kOne, kOne + kvt_exp(-z));
    return s * (kOne + z * (kOne - s));
  } else if constexpr (ACT == 2) {
    constexpr F kA = F(0.7978845608028654), kB = F(0.044715);
    const F t = kvt_tanh(kA * (z + kB * z * z * z));
    return kHalf * (kOne + t) + kHalf * z * (kOne - t * t) * kA * (kOne + F(3) * kB * z * z);
  } else if constexpr (ACT == 3) {
    return kHalf * (kOne + kvt_erf(z * F(0.7071067811865476))) + z * kvt_exp(-kHalf * z * z) * F(0.3989422804014327);
  } else if constexpr (ACT == 4) {
    return z <= F(0) ? F(0) : kOne;  // as torch's threshold_backward
  } else {
    return kOne;
  }
}

// The value stored for accumulator z at output element o (F float or double: the reference's).
template <int EPI, class T, class F>
__device__ __forceinline__ F kvt_epilogue(F z, const KvtDwConvParams& p, long long o) {
  if constexpr (kvt_grad_prep(EPI))
    return F(kvt_to_float(static_cast<const T*>(p.aux)[o])) * kvt_act_derivative<kvt_act_of(EPI)>(z);
  else
    return kvt_act_value<EPI>(z);
}

// VC outputs at consecutive elements from o, stored as one aligned vector: z in place (gradient prep:
// dy read as the same vector).
template <int EPI, class T, int VC>
__device__ __forceinline__ void kvt_epilogue_vec(float (&z)[VC], const KvtDwConvParams& p, long long o) {
  if constexpr (kvt_grad_prep(EPI)) {
    const Vec<T, VC> g = *reinterpret_cast<const Vec<T, VC>*>(static_cast<const T*>(p.aux) + o);
#pragma unroll
    for (int u = 0; u < VC; ++u) z[u] = kvt_to_float(g.v[u]) * kvt_act_derivative<kvt_act_of(EPI)>(z[u]);
  } else if constexpr (EPI != 0) {
#pragma unroll
    for (int u = 0; u < VC; ++u) z[u] = kvt_act_value<EPI>(z[u]);
  }
}
