// What a small node before a kernel costs under CUDA-graph replay: the kernels that need zeroed
// arrival counters had a 64-byte cudaMemsetAsync before every launch (the normalization
// backward's cooperative form and the split rows' one-pass form until 2026-12-02). A graph of 20
// steps is replayed, each step
//   kernel            one 132 x 256 kernel that reads one word
//   memset+kernel     a 64-byte cudaMemsetAsync, then the kernel
//   tiny+kernel       a 1 x 32 kernel, then the kernel
// Prints µs per step (median of 15 replays, after 20 warm-up replays).
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probe/graph_node_probe.cu -o graph_node_probe && ./graph_node_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "probe_check.h"

__global__ void reads_one_word(unsigned* p) {
  if (p[0] == 12345u) p[1] = 1;  // never true: the buffer is zeroed
}

int main() {
  unsigned* buf = nullptr;
  CHECK(cudaMalloc(&buf, 1 << 20));
  CHECK(cudaMemset(buf, 0, 1 << 20));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  const char* names[] = {"kernel", "memset+kernel", "tiny+kernel"};
  constexpr int kSteps = 20, kReplays = 15;
  std::printf("| step | µs per step |\n|---|---|\n");
  for (int form = 0; form < 3; ++form) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kSteps; ++i) {
      if (form == 1) CHECK(cudaMemsetAsync(buf + 1024, 0, 64, s));
      if (form == 2) reads_one_word<<<1, 32, 0, s>>>(buf + 2048);
      reads_one_word<<<132, 256, 0, s>>>(buf);
    }
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int w = 0; w < 20; ++w) CHECK(cudaGraphLaunch(exec, s));
    float t[kReplays];
    for (float& ms : t) {
      CHECK(cudaEventRecord(a, s));
      CHECK(cudaGraphLaunch(exec, s));
      CHECK(cudaEventRecord(b, s));
      CHECK(cudaEventSynchronize(b));
      CHECK(cudaEventElapsedTime(&ms, a, b));
    }
    std::sort(t, t + kReplays);
    std::printf("| %s | %.3f |\n", names[form], t[kReplays / 2] * 1000.f / kSteps);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
  }
  return 0;
}
