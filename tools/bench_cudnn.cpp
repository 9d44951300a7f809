// cuDNN depthwise convolution for kvtune-bench (see bench_cudnn.h). Without cuDNN at build time the
// class reports that it is absent and kvtune-bench records cuDNN as unsupported.
#include "tools/bench_cudnn.h"

#include <stdexcept>

#include <fmt/format.h>

#if defined(KVTUNE_BENCH_HAVE_CUDNN)
#include <cudnn.h>
#endif

namespace kvtune::bench {

#if defined(KVTUNE_BENCH_HAVE_CUDNN)

namespace {

void cudnn_check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) throw std::runtime_error(fmt::format("{}: {}", what, cudnnGetErrorString(status)));
}

cudnnDataType_t data_type(DType d) {
  switch (d) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
  }
  return CUDNN_DATA_FLOAT;
}

const char* fwd_name(int algo) {
  static const char* names[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                "FFT",           "FFT_TILING",            "WINOGRAD", "WINOGRAD_NONFUSED"};
  return algo >= 0 && algo < 8 ? names[algo] : "?";
}
const char* bwd_data_name(int algo) {
  static const char* names[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return algo >= 0 && algo < 6 ? names[algo] : "?";
}
const char* bwd_filter_name(int algo) {
  static const char* names[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  return algo >= 0 && algo < 7 ? names[algo] : "?";
}

// The first successful result of a cudnnFind*Ex call (results come sorted by time).
template <class Perf>
const Perf& fastest(const Perf* perf, int returned, const char* what) {
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return perf[i];
  throw std::runtime_error(fmt::format("unsupported: {} found no algorithm for this problem", what));
}

}  // namespace

struct CudnnDepthwise::Impl {
  DwDirection direction = DwDirection::forward;
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;  // x: the convolution's input, y: its output
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  int algo = 0;
  std::string label;

  ~Impl() {
    if (workspace != nullptr) cudaFree(workspace);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (handle != nullptr) cudnnDestroy(handle);
  }
};

bool cudnn_built() { return true; }

std::string cudnn_description() {
  const std::size_t v = cudnnGetVersion();
  return fmt::format("{}.{}.{} (built against {}.{}.{})", v / 10000, (v % 10000) / 100, v % 100, CUDNN_MAJOR,
                     CUDNN_MINOR, CUDNN_PATCHLEVEL);
}

CudnnDepthwise::CudnnDepthwise(const DwConvArgs& a, cudaStream_t stream, const DwTensors& sample,
                               std::size_t max_workspace)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.direction = a.direction;
  m.stream = stream;
  int pad_h = a.pad_top, pad_w = a.pad_left;
  if (a.causal) {
    pad_h = 0;
    pad_w = (a.kernel_w - 1) * a.dilation_w;
  } else if (a.pad_top != a.pad_bottom || a.pad_left != a.pad_right) {
    throw std::runtime_error("unsupported: cuDNN takes symmetric padding only");
  }
  const bool channel_last = a.layout == DwLayout::nhwc || a.layout == DwLayout::nlc;
  const cudnnTensorFormat_t format = channel_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const cudnnDataType_t type = data_type(a.dtype);
  const int n = int(a.n), c = int(a.c), h = int(a.h), w = int(a.w);

  cudnn_check(cudnnCreate(&m.handle), "cudnnCreate");
  cudnn_check(cudnnSetStream(m.handle, stream), "cudnnSetStream");
  cudnn_check(cudnnCreateTensorDescriptor(&m.x), "cudnnCreateTensorDescriptor");
  cudnn_check(cudnnCreateTensorDescriptor(&m.y), "cudnnCreateTensorDescriptor");
  cudnn_check(cudnnCreateFilterDescriptor(&m.w), "cudnnCreateFilterDescriptor");
  cudnn_check(cudnnCreateConvolutionDescriptor(&m.conv), "cudnnCreateConvolutionDescriptor");
  cudnn_check(cudnnSetTensor4dDescriptor(m.x, format, type, n, c, h, w), "cudnnSetTensor4dDescriptor (input)");
  // One input channel per group: [C, 1, KH, KW] is kvtune's [C, KH, KW] in either format.
  cudnn_check(cudnnSetFilter4dDescriptor(m.w, type, format, c, 1, a.kernel_h, a.kernel_w), "cudnnSetFilter4dDescriptor");
  cudnn_check(cudnnSetConvolution2dDescriptor(m.conv, pad_h, pad_w, a.stride_h, a.stride_w, a.dilation_h, a.dilation_w,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              "cudnnSetConvolution2dDescriptor");
  cudnn_check(cudnnSetConvolutionGroupCount(m.conv, c), "cudnnSetConvolutionGroupCount");
  // f32 without TF32 (kvtune computes in f32 FMA); f16/bf16 may use tensor cores.
  cudnn_check(cudnnSetConvolutionMathType(m.conv, a.dtype == DType::f32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
              "cudnnSetConvolutionMathType");
  int on = 0, oc = 0, oh = 0, ow = 0;
  cudnn_check(cudnnGetConvolution2dForwardOutputDim(m.conv, m.x, m.w, &on, &oc, &oh, &ow),
              "cudnnGetConvolution2dForwardOutputDim");
  cudnn_check(cudnnSetTensor4dDescriptor(m.y, format, type, on, oc, oh, ow), "cudnnSetTensor4dDescriptor (output)");

  void* find_workspace = nullptr;
  if (max_workspace > 0 && cudaMalloc(&find_workspace, max_workspace) != cudaSuccess) {
    cudaGetLastError();
    find_workspace = nullptr;
    max_workspace = 0;
  }
  std::size_t needed = 0;
  try {
    int returned = 0;
    if (a.direction == DwDirection::forward) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      cudnn_check(cudnnFindConvolutionForwardAlgorithmEx(m.handle, m.x, sample.in0, m.w, sample.in1, m.conv, m.y,
                                                         sample.out, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf,
                                                         find_workspace, max_workspace),
                  "cudnnFindConvolutionForwardAlgorithmEx");
      const auto& best = fastest(perf, returned, "cudnnFindConvolutionForwardAlgorithmEx");
      m.algo = int(best.algo);
      needed = best.memory;
      m.label = fwd_name(m.algo);
    } else if (a.direction == DwDirection::backward_data) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      cudnn_check(cudnnFindConvolutionBackwardDataAlgorithmEx(m.handle, m.w, sample.in1, m.y, sample.in0, m.conv, m.x,
                                                              sample.out, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                              &returned, perf, find_workspace, max_workspace),
                  "cudnnFindConvolutionBackwardDataAlgorithmEx");
      const auto& best = fastest(perf, returned, "cudnnFindConvolutionBackwardDataAlgorithmEx");
      m.algo = int(best.algo);
      needed = best.memory;
      m.label = bwd_data_name(m.algo);
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      cudnn_check(cudnnFindConvolutionBackwardFilterAlgorithmEx(m.handle, m.x, sample.in0, m.y, sample.in1, m.conv,
                                                                m.w, sample.out, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                                &returned, perf, find_workspace, max_workspace),
                  "cudnnFindConvolutionBackwardFilterAlgorithmEx");
      const auto& best = fastest(perf, returned, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
      m.algo = int(best.algo);
      needed = best.memory;
      m.label = bwd_filter_name(m.algo);
    }
  } catch (...) {
    if (find_workspace != nullptr) cudaFree(find_workspace);
    throw;
  }
  if (find_workspace != nullptr) cudaFree(find_workspace);
  if (needed > 0 && cudaMalloc(&m.workspace, needed) != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(fmt::format("cudaMalloc of cuDNN's {} B workspace failed", needed));
  }
  m.workspace_bytes = needed;
  m.label = fmt::format("{}, workspace {} B", m.label, needed);
}

CudnnDepthwise::~CudnnDepthwise() = default;

void CudnnDepthwise::run(const DwTensors& t) {
  Impl& m = *impl_;
  const float one = 1.0f, zero = 0.0f;
  if (m.direction == DwDirection::forward) {
    cudnn_check(cudnnConvolutionForward(m.handle, &one, m.x, t.in0, m.w, t.in1, m.conv,
                                        cudnnConvolutionFwdAlgo_t(m.algo), m.workspace, m.workspace_bytes, &zero, m.y,
                                        t.out),
                "cudnnConvolutionForward");
  } else if (m.direction == DwDirection::backward_data) {
    cudnn_check(cudnnConvolutionBackwardData(m.handle, &one, m.w, t.in1, m.y, t.in0, m.conv,
                                             cudnnConvolutionBwdDataAlgo_t(m.algo), m.workspace, m.workspace_bytes,
                                             &zero, m.x, t.out),
                "cudnnConvolutionBackwardData");
  } else {
    cudnn_check(cudnnConvolutionBackwardFilter(m.handle, &one, m.x, t.in0, m.y, t.in1, m.conv,
                                               cudnnConvolutionBwdFilterAlgo_t(m.algo), m.workspace, m.workspace_bytes,
                                               &zero, m.w, t.out),
                "cudnnConvolutionBackwardFilter");
  }
}

const std::string& CudnnDepthwise::algorithm() const { return impl_->label; }

#else  // built without cuDNN

struct CudnnDepthwise::Impl {
  std::string label;
};

bool cudnn_built() { return false; }

std::string cudnn_description() { return "not available (kvtune-bench was built without cuDNN: CMake found no libcudnn.so.9)"; }

CudnnDepthwise::CudnnDepthwise(const DwConvArgs&, cudaStream_t, const DwTensors&, std::size_t) {
  throw std::runtime_error("unsupported: kvtune-bench was built without cuDNN");
}

CudnnDepthwise::~CudnnDepthwise() = default;

void CudnnDepthwise::run(const DwTensors&) { throw std::runtime_error("kvtune-bench was built without cuDNN"); }

const std::string& CudnnDepthwise::algorithm() const { return impl_->label; }

#endif

}  // namespace kvtune::bench
