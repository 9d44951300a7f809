// Times hand-picked instantiations of the dwconv tiled kernel on the benchmark's shapes, outside
// the tuner, so a kernel experiment (or a profiler run) needs one nvcc build and no cache:
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ikernel_templates -Ikernel_templates/dwconv \
//        bench/probe/dwconv_probe.cu -o /tmp/dwconv_probe && /tmp/dwconv_probe [--once]
// --once launches every variant once (for a profiler). Inputs are random, rotated over enough
// buffers to exceed L2; each variant is checked against the direct kernel on the first buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dwconv.cu"

namespace {

struct Shape {
  const char* name;
  int layout;  // 0 channel-first, 1 channel-last
  long long n, c, h, w;
  int kh, kw, ph, pw;  // stride 1, dilation 1, symmetric padding (or causal: pw = K - 1, right 0)
  bool causal;
  long long out_h() const { return h + 2 * ph - kh + 1; }
  long long out_w() const { return causal ? w : w + 2 * pw - kw + 1; }
};

template <class T> __global__ void fill(T* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = kvt_from_float<T>(((x & 0xffffff) / 16777216.0f) - 0.5f);
  }
}

template <class T> __global__ void max_diff(const T* a, const T* b, long long n, float* out) {
  float m = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    m = fmaxf(m, fabsf(kvt_to_float(a[i]) - kvt_to_float(b[i])));
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));
}

bool g_once = false;

template <class T> struct Bufs {
  std::vector<T*> src, dst;
  T* wt = nullptr;
  T* ref = nullptr;
  long long src_n = 0, dst_n = 0;
  Bufs(const Shape& s) {
    src_n = s.n * s.c * s.h * s.w;
    dst_n = s.n * s.c * s.out_h() * s.out_w();
    const long long bytes = (src_n + dst_n) * (long long)sizeof(T);
    const int slots = g_once ? 1 : (int)std::max(2LL, std::min(16LL, (2LL * 60 << 20) / bytes + 1));
    for (int i = 0; i < slots; ++i) {
      T* a; T* b;
      cudaMalloc(&a, src_n * sizeof(T));
      cudaMalloc(&b, dst_n * sizeof(T));
      fill<<<1024, 256>>>(a, src_n, 17 + i);
      src.push_back(a), dst.push_back(b);
    }
    cudaMalloc(&wt, s.c * s.kh * s.kw * sizeof(T));
    fill<<<64, 256>>>(wt, s.c * s.kh * s.kw, 5);
    cudaMalloc(&ref, dst_n * sizeof(T));
  }
  KvtDwConvParams params(const Shape& s, int slot) const {
    KvtDwConvParams p{};
    p.src = src[slot], p.dst = dst[slot], p.weight = wt;
    p.batch = s.n, p.channels = s.c, p.src_h = s.h, p.src_w = s.w, p.dst_h = s.out_h(), p.dst_w = s.out_w();
    return p;
  }
};

template <class T> double bytes_of(const Shape& s) {
  return double(sizeof(T)) * double(s.n * s.c) * double(s.h * s.w + s.out_h() * s.out_w());
}

// Median over 15 rounds of one round's time per slot; `round` launches every slot once.
template <class Round> double median_us(int slots, Round round) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int rep = 0; rep < 15; ++rep) {
    cudaEventRecord(e0);
    round();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t / slots);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}

template <class T, class K>
void time_variant(const Shape& s, Bufs<T>& b, const char* label, K kernel, dim3 grid, dim3 block, size_t smem,
                  bool is_ref = false) {
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  KvtDwConvParams p = b.params(s, 0);
  if (is_ref) p.dst = b.ref;
  kernel<<<grid, block, smem>>>(p);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    std::printf("%-28s %-60s launch failed: %s\n", s.name, label, cudaGetErrorString(e));
    std::exit(1);
  }
  if (is_ref || g_once) return;
  float* d;
  cudaMalloc(&d, 4);
  cudaMemset(d, 0, 4);
  max_diff<<<1024, 256>>>(b.dst[0], b.ref, b.dst_n, d);
  float diff = 0;
  cudaMemcpy(&diff, d, 4, cudaMemcpyDeviceToHost);
  cudaFree(d);
  const int slots = (int)b.src.size();
  for (int i = 0; i < 5; ++i) kernel<<<grid, block, smem>>>(b.params(s, i % slots));
  const double us = median_us(slots, [&] {
    for (int i = 0; i < slots; ++i) kernel<<<grid, block, smem>>>(b.params(s, i));
  });
  std::printf("%-28s %-60s %8.1f us %7.0f GB/s  maxdiff %.2e\n", s.name, label, us, bytes_of<T>(s) / us * 1e-3, diff);
}

// The tiled kernel's launch geometry (dwconv_family.cpp geometry(), global halo).
template <class T, int LAYOUT, int KH, int KW, int PH, int PW, int RW, int TX, int TY, int VC, int FILTER, int RH>
void tiled(const Shape& s, Bufs<T>& b) {
  auto k = kvt_dwconv_tiled<T, LAYOUT, 0, KH, KW, 1, 1, 1, 1, PH, PW, RW, TX, TY, VC, 0, FILTER, 0, RH>;
  dim3 grid;
  size_t smem = 0;
  if (LAYOUT == 0) {
    grid = dim3((unsigned)(s.n * s.c * ((s.out_w() + TX * RW - 1) / (TX * RW))), (unsigned)((s.out_h() + TY * RH - 1) / (TY * RH)));
    smem = FILTER ? (KH * KW + 3) / 4 * 16 : 0;
  } else {
    // (W run, channel vector) pairs of a row over blocks of TX threads.
    const long long items = s.c / VC * ((s.out_w() + RW - 1) / RW);
    grid = dim3((unsigned)((items + TX - 1) / TX), (unsigned)(s.n * ((s.out_h() + TY * RH - 1) / (TY * RH))));
    smem = FILTER ? size_t(KH * KW) * TX * VC * 4 : 0;
  }
  char label[128];
  std::snprintf(label, sizeof label, "tiled rw=%d tx=%d ty=%d vc=%d filter=%s rh=%d", RW, TX, TY, VC, FILTER ? "smem" : "reg", RH);
  time_variant(s, b, label, k, grid, dim3(TX * TY), smem);
}

// Flat items (channel-first, dwconv_family.cpp geometry(): TX threads a block over (plane, RH rows, run of RW)).
template <class T, int KH, int KW, int PH, int PW, int RW, int TX, int VC, int RH>
void flat(const Shape& s, Bufs<T>& b) {
  auto k = kvt_dwconv_tiled<T, 0, 0, KH, KW, 1, 1, 1, 1, PH, PW, RW, TX, 1, VC, 0, 0, 0, RH, 1, 1>;
  const long long items = s.n * s.c * ((s.out_h() + RH - 1) / RH) * ((s.out_w() + RW - 1) / RW);
  char label[128];
  std::snprintf(label, sizeof label, "flat rw=%d block=%d vc=%d rh=%d", RW, TX, VC, RH);
  time_variant(s, b, label, k, dim3((unsigned)((items + TX - 1) / TX)), dim3(TX), 0);
}

// backward_weight (channel-first, stride 1): dw of dy = dst-shaped random data against x = src, split
// partials in a workspace; the reference is the one-tap-a-thread "coalesced" form with one split.
// Launches `k` on cols x splits blocks of `block` threads with `smem` dynamic shared memory, checks
// it against the reference, times it (the counters' memset included) and prints `label`.
template <int KH, int KW, int PH, int PW, class K>
void wgrad_run(const Shape& s, Bufs<float>& b, K k, long long cols, int splits, int block, size_t smem, const std::string& label) {
  auto ref = kvt_dwconv_wgrad<float, 0, KH, KW, 1, 1, 1, 1, PH, PW, 1, 256, 1, 0, 0>;
  static float *dw = nullptr, *dw_ref = nullptr, *ws = nullptr;
  static unsigned* counters = nullptr;
  const long long taps = KH * KW;
  if (!dw) {
    cudaMalloc(&dw, s.c * taps * 4), cudaMalloc(&dw_ref, s.c * taps * 4);
    cudaMalloc(&ws, 128 * s.c * (taps + 1) * 4), cudaMalloc(&counters, s.c * taps * 4);
  }
  if (smem > 48 * 1024) cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  auto params = [&](int slot, long long n_splits, float* out) {
    KvtDwConvParams p = b.params(s, slot);
    p.aux = b.dst[(slot + 1) % b.dst.size()];  // dy: a filled buffer of the output's shape
    p.dst = out, p.workspace = ws, p.counters = counters, p.splits = n_splits;
    return p;
  };
  const dim3 grid((unsigned)cols, (unsigned)splits);
  for (auto* d : b.dst) fill<<<1024, 256>>>(d, b.dst_n, 99);
  ref<<<dim3((unsigned)(s.c * taps)), 256>>>(params(0, 1, dw_ref));
  cudaMemset(counters, 0, s.c * taps * 4);
  k<<<grid, block, smem>>>(params(0, splits, dw));
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    std::printf("%s: launch failed: %s\n", label.c_str(), cudaGetErrorString(e));
    std::exit(1);
  }
  if (g_once) return;  // Nsight Compute: one launch a variant
  std::vector<float> a(s.c * taps), r(s.c * taps);
  cudaMemcpy(a.data(), dw, a.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(r.data(), dw_ref, r.size() * 4, cudaMemcpyDeviceToHost);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, (double)std::fabs(a[i] - r[i]) / (1e-3 + std::fabs(r[i])));
  const int slots = (int)b.src.size();
  const double us = median_us(slots, [&] {
    for (int i = 0; i < slots; ++i) {
      cudaMemsetAsync(counters, 0, cols * 4);
      k<<<grid, block, smem>>>(params(i, splits, dw));
    }
  });
  std::printf("%-28s %s %8.1f us (incl. memset)  reldiff %.2e\n", s.name, label.c_str(), us, diff);
}

// The register-tiled weight gradient from global memory.
template <int KH, int KW, int PH, int PW, int PY, int TG, int SPLITS, int RW, int RH, int VC, int PIPE>
void wgrad(const Shape& s, Bufs<float>& b) {
  char label[128];
  std::snprintf(label, sizeof label, "wgrad py=%d tg=%d split=%d rw=%d rh=%d vc=%d pipe=%d", PY, TG, SPLITS, RW, RH, VC, PIPE);
  wgrad_run<KH, KW, PH, PW>(s, b, kvt_dwconv_wgrad<float, 0, KH, KW, 1, 1, 1, 1, PH, PW, 1, PY, TG, 0, 0, RW, RH, VC, PIPE>,
                            s.c * ((KH * KW + TG - 1) / TG), SPLITS, PY, 0, label);
}

// The staged weight gradient: two x planes in shared memory (dwconv_family.cpp wgrad_plane_bytes()).
template <int KH, int KW, int PH, int PW, int PY, int SPLITS, int RW, int RH, int VC>
void wgrad_staged(const Shape& s, Bufs<float>& b) {
  const int runs = (s.w + RW - 1) / RW, groups = (s.h + RH - 1) / RH;
  constexpr int kWin = RW + KW - 1, kLead = ((-PW % VC) + VC) % VC, kVecs = (kLead + kWin + VC - 1) / VC;
  const int x_rows = groups * RH - 1 + KH, x_pitch = (runs - 1) * RW + kVecs * VC;
  const size_t smem = 2 * size_t((x_rows * x_pitch + 3) / 4 * 4) * 4;
  char label[128];
  std::snprintf(label, sizeof label, "wgrad STAGED py=%d split=%d rw=%d rh=%d vc=%d smem=%zu", PY, SPLITS, RW, RH, VC, smem);
  wgrad_run<KH, KW, PH, PW>(s, b, kvt_dwconv_wgrad_staged<float, KH, KW, 1, 1, 1, 1, PH, PW, PY, 0, 0, RW, RH, VC>, s.c,
                            SPLITS, PY, smem, label);
}

// The tensor-core tile's launch geometry (dwconv_family.cpp mma_tile() and mma_smem_bytes(), stride 1,
// no dilation).
template <class T, int KH, int KW, int PH, int PW, int CB, int TR, int NT, int WARPS>
void mma(const Shape& s, Bufs<T>& b) {
  constexpr int runs = 16 / TR, run_w = 8 * NT, tile_w = runs * run_w;
  constexpr int steps = (8 + KW - 1 + 15) / 16;
  constexpr int rows = TR + KH - 1, columns = (runs - 1) * run_w + (NT - 1) * 8 + 16 * steps;
  constexpr int pitch = (columns + 7) / 16 * 16 + 8;
  constexpr int group_step = CB / 8 == 2 ? 32 : 16, tap_row = KW < 4 ? 4 : KW < 8 ? 8 : KW + 1;
  const size_t elements = size_t(CB) * rows * pitch + (CB / 8 - 1) * group_step + size_t(CB) * KH * tap_row;
  const size_t smem = (elements * 2 + 15) / 16 * 16;
  const long long tiles = (s.c + CB - 1) / CB * s.n * ((s.out_h() + TR - 1) / TR) * ((s.out_w() + tile_w - 1) / tile_w);
  char label[96];
  std::snprintf(label, sizeof label, "mma cb=%d tr=%d nt=%d warps=%d", CB, TR, NT, WARPS);
  time_variant(s, b, label, kvt_dwconv_mma<T, 1, 0, KH, KW, 1, 1, 1, 1, PH, PW, CB, TR, NT, WARPS, pitch, 0>,
               dim3((unsigned)tiles), dim3(WARPS * 32), smem);
}

template <class T, int LAYOUT, int KH, int KW, int PH, int PW>
void reference(const Shape& s, Bufs<T>& b) {
  auto k = kvt_dwconv_direct<T, LAYOUT, 0, KH, KW, 1, 1, 1, 1, PH, PW, 1, 0>;
  const long long total = b.dst_n;
  time_variant(s, b, "direct coalesced", k, dim3((unsigned)std::min<long long>((total + 255) / 256, 1 << 20)), dim3(256), 0, true);
}

void copy_rate(double bytes_each) {
  void *a, *b;
  const size_t n = size_t(1) << 30;
  cudaMalloc(&a, n), cudaMalloc(&b, n);
  cudaMemset(a, 1, n);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("copy 1 GiB: %.0f GB/s (read + write)\n", 2.0 * n / (ms[6] * 1e-3) * 1e-9);
  (void)bytes_each;
  cudaFree(a), cudaFree(b);
}

}  // namespace

#include "dwconv_probe_variants.inc"

int main(int argc, char** argv) {
  g_once = argc > 1 && std::strcmp(argv[1], "--once") == 0;
  if (!g_once) copy_rate(0);
  run_variants();
  return 0;
}
