"""kvtune from Python: JIT-compiled, autotuned CUDA kernels for row normalization and depthwise
convolution, over the library's C ABI with ctypes.

  import kvtune.torch   # layer_norm, rms_norm, standardize, dwconv1d, causal_conv1d, dwconv2d
  import kvtune.nn      # LayerNorm, RMSNorm, DepthwiseConv1d/2d, CausalConv1d, patch(model)

This module needs no torch: Context, version() and the errors come from kvtune._capi.
"""

from ._capi import (CaptureError, Context, InvalidArgumentError, KvtuneError, LibraryNotFoundError, NoGpuError,
                    abi_version, counters, get_context, library_path, set_context, version)

__version__ = "0.1.0"

__all__ = [
    "Context", "KvtuneError", "InvalidArgumentError", "NoGpuError", "CaptureError", "LibraryNotFoundError",
    "version", "abi_version", "counters", "library_path", "set_context", "get_context", "__version__",
]
