#pragma once
// Fixtures of the dwconv CPU tests (test_dwconv.cpp, test_dwconv_variants.cpp): arguments with
// placeholder pointers for 1D and 2D problems, the benchmark shapes, and compiling a selection of
// variants with NVRTC.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <variant>
#include <vector>

#include "compile_batches.h"
#include "kernel_templates/dwconv/dwconv_family.h"

namespace kvtune::test {

inline void* fake(std::uintptr_t offset) { return reinterpret_cast<void*>((std::uintptr_t(1) << 24) + offset); }

inline DwConvArgs args_2d(DwDirection d = DwDirection::forward, DwLayout l = DwLayout::nchw) {
  DwConvArgs a;
  a.direction = d;
  a.layout = l;
  a.n = 2;
  a.c = 16;
  a.h = 9;
  a.w = 11;
  a.kernel_h = a.kernel_w = 3;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
  a.x = fake(0);
  a.weight = fake(1 << 20);
  a.y = fake(2 << 20);
  a.dy = fake(3 << 20);
  a.dx = fake(4 << 20);
  a.dweight = fake(5 << 20);
  return a;
}

// A forward k x k convolution with "same" padding on [n, c, 56, 56].
inline DwConvArgs square_56(DwLayout l, DType t, std::int64_t n, std::int64_t c, int k) {
  DwConvArgs a = args_2d(DwDirection::forward, l);
  a.dtype = t;
  a.n = n, a.c = c, a.h = a.w = 56;
  a.kernel_h = a.kernel_w = k;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = k / 2;
  return a;
}
// RepLKNet-31B stage 1: 31x31 pad 15 on [16, 128, 56, 56].
inline DwConvArgs replknet_31x31(DwLayout l, DType t) { return square_56(l, t, 16, 128, 31); }
// ConvNeXt 7x7 pad 3 on [32, 96, 56, 56].
inline DwConvArgs convnext_7x7(DwLayout l, DType t) { return square_56(l, t, 32, 96, 7); }

inline DwConvArgs args_1d(DwDirection d, DwLayout l, int k, int s, int dil) {
  DwConvArgs a = args_2d(d, l);
  a.h = 1;
  a.w = 40;
  a.kernel_h = 1;
  a.kernel_w = k;
  a.stride_w = s;
  a.dilation_w = dil;
  a.pad_top = a.pad_bottom = 0;
  a.pad_left = a.pad_right = 0;
  a.causal = true;
  return a;
}

// The tiled config of a variant; nullptr for the other kernels.
inline const dwconv::TiledConfig* tiled_of(const dwconv::Config& c) {
  return std::get_if<dwconv::TiledConfig>(&c.variant());
}

// Compiles for sm_90 the variants `keep` selects of each problem's forward and backward_data twins;
// every compile must succeed. Returns how many were compiled.
inline std::size_t compile_selected(std::initializer_list<DwConvArgs> problems, const std::function<bool(const dwconv::Config&)>& keep) {
  std::vector<detail::CompileRequest> batches;
  std::size_t variants = 0;
  for (DwConvArgs a : problems)
    for (DwDirection d : {DwDirection::forward, DwDirection::backward_data}) {
      a.direction = d;
      const dwconv::Problem r = dwconv::make_problem(a);
      std::vector<detail::CompileRequest> requests;
      for (const auto& v : dwconv::enumerate(r))
        if (keep(v)) requests.push_back(dwconv::compile_request(r, v, "sm_90"));
      variants += requests.size();
      test::add_batched(batches, requests, 32);
    }
  test::check_compiled(batches, variants);
  return variants;
}

}  // namespace kvtune::test
