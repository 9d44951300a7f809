// Include before a kernel source compiled as host C++ on emulated threads (tests/emulation/
// common.cuh), and tests/emulation/kernel_end.h after it. CUDA's host headers (through the library's)
// define these qualifiers for the host compiler: for the emulated kernel they mean nothing, except
// __shared__: one block runs at a time, so a function's statics are its block's shared memory.
// No include guard: each inclusion sets the macros again.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)
