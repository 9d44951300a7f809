// Kernel arguments of the normalize family: one struct, passed by value, with the same layout in
// host code and in the NVRTC program (this file is compiled by both).
#pragma once

struct KvtNormalizeParams {
  const void* x;      // [rows x cols], leading dimension ld_x elements
  void* y;            // [rows x cols], leading dimension ld_y elements; may equal x
  const void* gamma;  // [cols] in x's dtype, or null
  const void* beta;   // [cols] in x's dtype, or null
  float* mean;        // [rows] f32, or null
  float* rstd;        // [rows] f32, or null
  long long rows;
  long long cols;
  long long ld_x;
  long long ld_y;
  float eps;
  int ddof;
};
