"""kvtune operators for PyTorch tensors.

Functions (each also registered with torch.library as ``torch.ops.kvtune.<name>`` on torch >= 2.4):

  layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5)
  rms_norm(x, normalized_shape, weight=None, eps=None)
  standardize(x, eps=1e-5, ddof=0)                  per-row (x - mean) / (std + eps) over the last dim
  dwconv1d(x, weight, bias=None, stride=1, padding=0, dilation=1)      x [N, C, L], NCL or NLC memory
  causal_conv1d(x, weight, bias=None, dilation=1)                      left pad (K - 1) * dilation
  dwconv2d(x, weight, bias=None, stride=1, padding=0, dilation=1)      x [N, C, H, W], NCHW or channels_last
  causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                       conv_state_indices=None, overlap_prologue=False)   one decode step, conv_state updated in place
The dwconv functions take activation=None, "silu", "gelu" (exact, erf), "gelu_tanh" or "relu": the
activation fused into the kernel, act(conv(x) + bias); its backward recomputes conv(x) + bias, so no
pre-activation tensor is saved.

Each call runs on the tensors' CUDA device and the current stream. Three routes, one semantics:
  - no autograd needed, eager: straight to the C ABI (the cached path: no dispatcher, no allocation
    beyond the outputs);
  - autograd needed, eager: a torch.autograd.Function over the same calls;
  - under torch.compile (or with tensor subclasses such as FakeTensor): the torch.library custom ops,
    with fake (meta) kernels and registered autograd, so fullgraph=True traces them without a break.
Normalization backward runs kvtune's tuned normalize backward kernel from the mean and rstd the
forward saves (dx, and dweight/dbias summed deterministically); depthwise convolution backward runs
kvtune's backward_data and backward_weight kernels.
"""

import ctypes
import math
from typing import Optional, Sequence, Tuple, Union

import torch

from . import _capi
from ._capi import InvalidArgumentError

__all__ = [
    "layer_norm", "rms_norm", "standardize", "add_layer_norm", "add_rms_norm", "add_standardize",
    "dwconv1d", "causal_conv1d", "dwconv2d", "causal_conv1d_update",
    "HAS_CUSTOM_OPS", "TORCH_VERSION",
]


def _version_tuple(text):
    parts = []
    for p in text.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


TORCH_VERSION = _version_tuple(torch.__version__)
#: torch.library.custom_op, register_fake and register_autograd (torch >= 2.4): torch.compile support.
HAS_CUSTOM_OPS = TORCH_VERSION >= (2, 4) and hasattr(torch.library, "custom_op")

_DTYPES = {torch.float32: _capi.F32, torch.float16: _capi.F16, torch.bfloat16: _capi.BF16}

if hasattr(torch, "compiler") and hasattr(torch.compiler, "is_compiling"):
    _is_compiling = torch.compiler.is_compiling
else:  # torch < 2.3
    def _is_compiling():
        return False

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None)


def _stream(device_index):
    if _raw_stream is not None:
        return _raw_stream(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def _run(call, args, index):
    """call(args, stream) on device `index`'s current stream, with that device current (kvtune
    launches on the current device; the guard is only taken when another one is current)."""
    current = _current_device() if _current_device is not None else torch.cuda.current_device()
    if current == index:
        call(args, _stream(index))
    else:
        with torch.cuda.device(index):
            call(args, _stream(index))


# ---- argument checks (shared by the eager path and the fake kernels) --------------------------

def _invalid(op, field, why):
    return InvalidArgumentError(f"kvtune {op}: {why} [field {field}]", 1, field)


def _check_tensor(op, field, t, like=None):
    if not isinstance(t, torch.Tensor):
        raise _invalid(op, field, f"{field} must be a tensor, got {type(t).__name__}")
    if t.dtype not in _DTYPES:
        raise _invalid(op, field, f"{field} has dtype {t.dtype}: kvtune supports float32, float16 and bfloat16")
    if not t.is_cuda:
        raise _invalid(op, field, f"{field} is on {t.device}: kvtune runs on CUDA tensors only")
    if like is not None:
        if t.get_device() != like.get_device():
            raise _invalid(op, field, f"{field} is on {t.device} but x is on {like.device}")
        if t.dtype != like.dtype:
            raise _invalid(op, field, f"{field} has dtype {t.dtype} but x has {like.dtype} (cast it first)")


def _normalized_cols(op, x, normalized_shape):
    if len(normalized_shape) == 1 and x.dim() >= 1 and x.shape[-1] == normalized_shape[0]:
        return normalized_shape[0]  # the common case, without building tuples (host time per call)
    ns = tuple(int(s) for s in normalized_shape)
    if len(ns) == 0 or len(ns) > x.dim() or tuple(x.shape[x.dim() - len(ns):]) != ns:
        raise _invalid(op, "normalized_shape",
                       f"normalized_shape {list(ns)} does not match the trailing dimensions of x {list(x.shape)}")
    return math.prod(ns)


def _row_stride(op, x, cols, rows, field="x"):
    """The leading dimension of x seen as [rows, cols] (unit stride along cols), or an error naming `field`."""
    if x.is_contiguous():
        return cols
    try:
        v = x.view(rows, cols)
    except RuntimeError:
        v = None
    if v is None or v.stride(1) != 1 or (rows > 1 and v.stride(0) < cols):
        raise _invalid(op, field, f"{field} with shape {list(x.shape)} and strides {list(x.stride())} is not rows "
                       "of unit-stride elements with one row stride: call .contiguous() first")
    return v.stride(0) if rows > 1 else cols


def norm_strides_supported(x, cols):
    """Whether x (viewed as [-1, cols]) can be normalized without a copy."""
    if x.is_contiguous():
        return True
    rows = x.numel() // cols if cols else 0
    try:
        v = x.view(rows, cols)
    except RuntimeError:
        return False
    return v.stride(1) == 1 and (rows <= 1 or v.stride(0) >= cols)


def _affine(op, field, t, x, cols):
    if t is None:
        return None
    _check_tensor(op, field, t, x)
    if t.numel() != cols:
        raise _invalid(op, field, f"{field} has {t.numel()} elements, the normalized shape {cols}")
    if not t.is_contiguous():
        t = t.contiguous()
    return t


# ---- normalization ---------------------------------------------------------------------------

_OP_OF_MODE = {_capi.STANDARDIZE: "standardize", _capi.LAYERNORM: "layer_norm", _capi.RMSNORM: "rms_norm"}


def _norm_forward(mode, x, cols, weight, bias, eps, ddof, stats, residual=None):
    """Runs the kvtune forward; returns (y, mean, rstd); mean and rstd are [rows] f32 when `stats`
    (mean is empty for rms_norm), else empty. With `residual` (x's shape, dtype and device) the rows
    normalized are s = x + residual, and the result is (y, mean, rstd, s)."""
    op = _OP_OF_MODE[mode] if residual is None else "add_" + _OP_OF_MODE[mode]
    _check_tensor(op, "x", x)
    weight = _affine(op, "weight", weight, x, cols)
    bias = _affine(op, "bias", bias, x, cols)
    rows = x.numel() // cols if cols else 0
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    s = None
    if residual is not None:
        _check_tensor(op, "residual", residual, like=x)
        if residual.shape != x.shape:
            raise _invalid(op, "residual", f"residual has shape {tuple(residual.shape)}, x {tuple(x.shape)}")
        s = torch.empty_like(x, memory_format=torch.contiguous_format)
    index = x.get_device()
    if stats:
        mean = x.new_empty((rows if mode != _capi.RMSNORM else 0,), dtype=torch.float32)
        rstd = x.new_empty((rows,), dtype=torch.float32)
    else:  # placeholders, never written
        mean = rstd = _EMPTY_STATS.get(index)
        if mean is None:
            mean = rstd = _EMPTY_STATS.setdefault(index, x.new_empty((0,), dtype=torch.float32))
    if rows == 0:
        return (y, mean, rstd) if s is None else (y, mean, rstd, s)
    ld = _row_stride(op, x, cols, rows)
    a = _capi.normalize_args()
    a.dtype = _DTYPES[x.dtype]
    a.mode = mode
    a.ddof = ddof
    a.eps = eps
    a.x = x.data_ptr()
    a.y = y.data_ptr()
    a.rows = rows
    a.cols = cols
    a.ld_x = ld
    if weight is not None:
        a.gamma = weight.data_ptr()
    if bias is not None:
        a.beta = bias.data_ptr()
    if stats:
        if mode != _capi.RMSNORM:
            a.mean = mean.data_ptr()
        a.rstd = rstd.data_ptr()
    if s is not None:
        # The full struct size: a library older than the residual fields refuses them instead of
        # ignoring them ("use a newer libkvtune").
        a.struct_size = ctypes.sizeof(_capi.NormalizeArgs)
        a.residual = residual.data_ptr()
        a.ld_residual = _row_stride(op, residual, cols, rows, "residual")
        a.residual_out = s.data_ptr()
    # Only rows of 64 KiB and more can be split across blocks, the one kind of forward variant that
    # takes a workspace: narrower rows skip the size query on the hot path.
    wide = cols * x.element_size() >= _SPLIT_ROW_BYTES
    _run(_norm_forward_wide_call if wide else _capi.normalize, a, index)
    return (y, mean, rstd) if s is None else (y, mean, rstd, s)


# kernel_templates/normalize/normalize_split.h, kMinRowBytes.
_SPLIT_ROW_BYTES = 64 * 1024


def _norm_forward_wide_call(a, stream):
    _call_with_workspace(_capi.normalize_workspace_size, _capi.normalize, a, stream)


_EMPTY_STATS = {}


def _norm_backward(mode, x, cols, weight, mean, rstd, eps, ddof, dy, need_x, need_w, need_b, ds=None):
    """The gradients through kvtune's tuned backward kernel, from the forward's saved statistics:
    (dx, dweight [cols] or None, dbias [cols] or None), dweight/dbias summed over the rows in a fixed
    order (deterministic). dx is computed whether or not need_x asks for it (it is the kernel's main
    output; dweight alone is not a separate variant). With a residual, x is the forward's s and `ds`
    (the gradient flowing into s, or None) is added to dx in the same kernel."""
    op = _OP_OF_MODE[mode] + "_backward"
    rows = x.numel() // cols if cols else 0
    dx = torch.empty_like(x, memory_format=torch.contiguous_format)
    dw = x.new_empty((cols,)) if need_w and weight is not None else None
    db = x.new_empty((cols,)) if need_b else None
    if rows == 0:
        for t in (dw, db):
            if t is not None:
                t.zero_()
        return dx, dw, db
    if dy.dtype != x.dtype:
        dy = dy.to(x.dtype)
    if not norm_strides_supported(dy, cols):
        dy = dy.contiguous()
    a = _capi.normalize_backward_args()
    a.dtype = _DTYPES[x.dtype]
    a.mode = mode
    a.ddof = ddof
    a.eps = eps
    a.x = x.data_ptr()
    a.dy = dy.data_ptr()
    a.dx = dx.data_ptr()
    a.rows = rows
    a.cols = cols
    a.ld_x = _row_stride(op, x, cols, rows)
    a.ld_dy = _row_stride(op, dy, cols, rows)
    if weight is not None:
        weight = weight.contiguous()
        a.gamma = weight.data_ptr()
    if mode != _capi.RMSNORM:
        a.mean = mean.data_ptr()
    a.rstd = rstd.data_ptr()
    if dw is not None:
        a.dgamma = dw.data_ptr()
    if db is not None:
        a.dbeta = db.data_ptr()
    if ds is not None:
        if ds.dtype != x.dtype:
            ds = ds.to(x.dtype)
        if not norm_strides_supported(ds, cols):
            ds = ds.contiguous()
        a.struct_size = ctypes.sizeof(_capi.NormalizeBackwardArgs)  # as the forward's residual fields
        a.dresidual_out = ds.data_ptr()
        a.ld_dresidual_out = _row_stride(op, ds, cols, rows, "ds")
    _run(_norm_backward_call, a, x.get_device())
    return dx, dw, db


def _call_with_workspace(size_fn, call_fn, a, stream):
    """call_fn(a, stream) with the workspace the dispatched variant needs (size_fn), allocated from
    PyTorch's caching allocator (a graph allocation under capture; PyTorch owns all memory) on the
    current stream; none for most variants."""
    for attempt in (0, 1):
        workspace_bytes = size_fn(a, stream)
        workspace = None
        if workspace_bytes:
            workspace = torch.empty((workspace_bytes,), dtype=torch.uint8, device="cuda")
            a.workspace = workspace.data_ptr()
            a.workspace_bytes = workspace_bytes
        try:
            call_fn(a, stream)
            return
        except InvalidArgumentError as e:
            # The dispatched variant changed between the query and the call (a background tuning
            # swapped its winner in): ask again, once.
            if e.field != "workspace_bytes" or attempt == 1:
                raise
        finally:
            del workspace  # freed in stream order after the launch


def _norm_backward_call(a, stream):
    _call_with_workspace(_capi.normalize_backward_workspace_size, _capi.normalize_backward, a, stream)


class _NormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mode, x, cols, weight, bias, eps, ddof):
        y, mean, rstd = _norm_forward(mode, x, cols, weight, bias, eps, ddof, True)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.mode, ctx.cols, ctx.eps, ctx.ddof = mode, cols, eps, ddof
        ctx.bias_shape = None if bias is None else bias.shape
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx, dw, db = _norm_backward(ctx.mode, x, ctx.cols, weight, mean, rstd, ctx.eps, ctx.ddof, dy,
                                    need[1], need[3], need[4] and ctx.bias_shape is not None)
        return (None, dx if need[1] else None, None, None if dw is None else dw.view(weight.shape),
                None if db is None else db.view(ctx.bias_shape), None, None)


class _AddNormFunction(torch.autograd.Function):
    """(y, s) = (norm(x + residual), x + residual); x and residual get the same gradient."""

    @staticmethod
    def forward(ctx, mode, x, residual, cols, weight, bias, eps, ddof):
        y, mean, rstd, s = _norm_forward(mode, x, cols, weight, bias, eps, ddof, True, residual)
        ctx.save_for_backward(s, weight, mean, rstd)
        ctx.mode, ctx.cols, ctx.eps, ctx.ddof = mode, cols, eps, ddof
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.set_materialize_grads(False)  # an unused s sends no gradient: dx takes no zeros
        return y, s

    @staticmethod
    def backward(ctx, dy, ds):
        s, weight, mean, rstd = ctx.saved_tensors
        need = ctx.needs_input_grad
        if dy is None:
            dy = torch.zeros_like(s)
        dx, dw, db = _norm_backward(ctx.mode, s, ctx.cols, weight, mean, rstd, ctx.eps, ctx.ddof, dy, True,
                                    need[4], need[5] and ctx.bias_shape is not None, ds)
        return (None, dx if need[1] else None, dx if need[2] else None, None,
                None if dw is None else dw.view(weight.shape), None if db is None else db.view(ctx.bias_shape),
                None, None)


def _add_norm(mode, x, residual, normalized_shape, weight, bias, eps, ddof):
    """The residual forms' common path: (y, s) with s = x + residual and y = norm(s)."""
    op = "add_" + _OP_OF_MODE[mode]
    if _traced(x):
        y, s, _, _ = torch.ops.kvtune.add_norm(x, residual, mode, normalized_shape, weight, bias, eps, ddof)
        return y, s
    if mode == _capi.STANDARDIZE:
        if x.dim() == 0:
            raise _invalid(op, "x", "x must have at least one dimension")
        cols = x.shape[-1]
    else:
        cols = _normalized_cols(op, x, normalized_shape)
    if _needs_grad(x, residual, weight, bias):
        return _AddNormFunction.apply(mode, x, residual, cols, weight, bias, eps, ddof)
    y, _, _, s = _norm_forward(mode, x, cols, weight, bias, eps, ddof, False, residual)
    return y, s


def add_layer_norm(x: torch.Tensor, residual: torch.Tensor, normalized_shape: Union[int, Sequence[int]],
                   weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                   eps: float = 1e-5) -> Tuple[torch.Tensor, torch.Tensor]:
    """The pre-norm residual step in one kernel: s = x + residual, y = layer_norm(s); returns (y, s).
    Equal to ``s = x + residual; y = F.layer_norm(s, normalized_shape, weight, bias, eps)``."""
    return _add_norm(_capi.LAYERNORM, x, residual, _shape_list(normalized_shape), weight, bias, float(eps), 0)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, normalized_shape: Union[int, Sequence[int]],
                 weight: Optional[torch.Tensor] = None, eps: Optional[float] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """s = x + residual, y = rms_norm(s) in one kernel; returns (y, s). eps None: torch.finfo(x.dtype).eps."""
    eps = float(torch.finfo(x.dtype).eps if eps is None else eps)
    return _add_norm(_capi.RMSNORM, x, residual, _shape_list(normalized_shape), weight, None, eps, 0)


def add_standardize(x: torch.Tensor, residual: torch.Tensor, eps: float = 1e-5,
                    ddof: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    """s = x + residual, y = standardize(s, eps, ddof) over the last dimension; returns (y, s)."""
    if ddof not in (0, 1):
        raise _invalid("add_standardize", "ddof", f"ddof must be 0 or 1, got {ddof}")
    return _add_norm(_capi.STANDARDIZE, x, residual, [], None, None, float(eps), int(ddof))


def _needs_grad(*tensors):
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False


def _traced(x):
    """Whether the call must go through the torch.library op (compiling, or a tensor subclass)."""
    return HAS_CUSTOM_OPS and (_is_compiling() or type(x) is not torch.Tensor)


def _op_conv_input(x):
    """x for a traced convolution op: a layout kvtune cannot take is copied here, in the graph, so that
    the op saves the copy for its backward. The op's own fallback copy would be made again by the
    weight gradient (Mamba's transposed half of in_proj: 2 copies a block instead of 1; H200,
    bench/NOTES.md, "long 1D kernels")."""
    return x if x.dim() not in (3, 4) or layout_supported(x) else x.contiguous()


def _shape_list(normalized_shape):
    if isinstance(normalized_shape, int):
        return [normalized_shape]
    return [int(s) for s in normalized_shape]


def layer_norm(x: torch.Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    """torch.nn.functional.layer_norm on kvtune: y = (x - mean) * rsqrt(var + eps) [* weight + bias]."""
    ns = _shape_list(normalized_shape)
    if _traced(x):
        return torch.ops.kvtune.layer_norm(x, ns, weight, bias, float(eps))[0]
    cols = _normalized_cols("layer_norm", x, ns)
    if _needs_grad(x, weight, bias):
        return _NormFunction.apply(_capi.LAYERNORM, x, cols, weight, bias, float(eps), 0)
    return _norm_forward(_capi.LAYERNORM, x, cols, weight, bias, eps, 0, False)[0]


def rms_norm(x: torch.Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[torch.Tensor] = None,
             eps: Optional[float] = None) -> torch.Tensor:
    """torch.nn.functional.rms_norm on kvtune: y = x * rsqrt(mean(x^2) + eps) [* weight]; eps None
    means torch.finfo(x.dtype).eps, as in PyTorch."""
    ns = _shape_list(normalized_shape)
    eps = float(torch.finfo(x.dtype).eps if eps is None else eps)
    if _traced(x):
        return torch.ops.kvtune.rms_norm(x, ns, weight, eps)[0]
    cols = _normalized_cols("rms_norm", x, ns)
    if _needs_grad(x, weight):
        return _NormFunction.apply(_capi.RMSNORM, x, cols, weight, None, eps, 0)
    return _norm_forward(_capi.RMSNORM, x, cols, weight, None, eps, 0, False)[0]


def standardize(x: torch.Tensor, eps: float = 1e-5, ddof: int = 0) -> torch.Tensor:
    """Per-row (x - mean) / (std + eps) over the last dimension; std with `ddof` 0 (population) or 1
    (torch.std's default: ``(x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps)``)."""
    if ddof not in (0, 1):
        raise _invalid("standardize", "ddof", f"ddof must be 0 or 1, got {ddof}")
    if _traced(x):
        return torch.ops.kvtune.standardize(x, float(eps), int(ddof))[0]
    if x.dim() == 0:
        raise _invalid("standardize", "x", "x must have at least one dimension")
    cols = x.shape[-1]
    if _needs_grad(x):
        return _NormFunction.apply(_capi.STANDARDIZE, x, cols, None, None, float(eps), int(ddof))
    return _norm_forward(_capi.STANDARDIZE, x, cols, None, None, eps, ddof, False)[0]


# ---- depthwise convolution -------------------------------------------------------------------
# A convolution's geometry travels as one int list, `cfg`:
#   [kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_bottom, pad_left,
#    pad_right, causal, deterministic, activation]
# 1D uses the w entries (kernel_h = stride_h = dilation_h = 1, no top/bottom padding); activation is
# kvt_activation's value (0: none).

# activation= names (PyTorch's: F.gelu's default is the exact, erf form) and their C ABI values.
_ACTIVATIONS = {None: _capi.ACT_NONE, "none": _capi.ACT_NONE, "silu": _capi.ACT_SILU, "gelu_tanh": _capi.ACT_GELU_TANH,
                "gelu": _capi.ACT_GELU_ERF, "gelu_erf": _capi.ACT_GELU_ERF, "relu": _capi.ACT_RELU}


def _activation_code(op, activation):
    if isinstance(activation, str) or activation is None:
        code = _ACTIVATIONS.get(activation)
        if code is not None:
            return code
    raise _invalid(op, "activation", f"activation must be None, 'silu', 'gelu', 'gelu_tanh' or 'relu', got {activation!r}")


def _layout_code(t):
    """kvtune's layout for the memory format of a 3D or 4D tensor, None where it has none. Raises
    nothing, so that torch.compile traces it (_op_conv_input)."""
    if t.dim() == 4:
        if t.is_contiguous():
            return _capi.NCHW
        if t.is_contiguous(memory_format=torch.channels_last):
            return _capi.NHWC
    elif t.dim() == 3:
        if t.is_contiguous():
            return _capi.NCL
        if t.transpose(1, 2).is_contiguous():
            return _capi.NLC
    return None


def _layout_of(op, field, t):
    """kvtune's layout for the memory format of a 3D or 4D tensor, or an error."""
    if t.dim() not in (3, 4):
        raise _invalid(op, field, f"{field} must be 3D [N, C, L] or 4D [N, C, H, W], got {t.dim()}D")
    layout = _layout_code(t)
    if layout is None:
        raise _invalid(op, field, f"{field} with shape {list(t.shape)} and strides {list(t.stride())} is neither "
                       "contiguous nor channels-last: call .contiguous() first")
    return layout


def layout_supported(t):
    """Whether t's memory format is one kvtune takes without a copy."""
    return _layout_code(t) is not None


def _to_layout(t, layout):
    if layout == _capi.NCHW or layout == _capi.NCL:
        return t.contiguous()
    if layout == _capi.NHWC:
        return t.contiguous(memory_format=torch.channels_last)
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def _empty_layout(shape, layout, like):
    if layout == _capi.NHWC:
        return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=torch.channels_last)
    if layout == _capi.NLC:
        n, c, l = shape
        return torch.empty_strided((n, c, l), (l * c, 1, c), dtype=like.dtype, device=like.device)
    return torch.empty(shape, dtype=like.dtype, device=like.device)


def _out_size(size, kernel, stride, dilation, before, after):
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


def _out_shape(x_shape, cfg):
    kh, kw, sh, sw, dh, dw, pt, pb, pl, pr, causal = cfg[:11]
    if causal:
        pl, pr = (kw - 1) * dw, 0
    if len(x_shape) == 3:
        return [x_shape[0], x_shape[1], _out_size(x_shape[2], kw, sw, dw, pl, pr)]
    return [x_shape[0], x_shape[1], _out_size(x_shape[2], kh, sh, dh, pt, pb), _out_size(x_shape[3], kw, sw, dw, pl, pr)]


def _check_conv(op, x, weight, bias, cfg):
    _check_tensor(op, "x", x)
    _check_tensor(op, "weight", weight, x)
    if bias is not None:
        _check_tensor(op, "bias", bias, x)
    c = x.shape[1]
    taps = cfg[0] * cfg[1]
    if weight.numel() != c * taps or weight.shape[0] != c:
        raise _invalid(op, "weight", f"weight {list(weight.shape)} is not one {cfg[0]}x{cfg[1]} filter per channel "
                       f"for {c} channels (depthwise: [C, 1, K...] or [C, K...])")
    if bias is not None and bias.numel() != c:
        raise _invalid(op, "bias", f"bias has {bias.numel()} elements for {c} channels")
    if any(s < 1 for s in _out_shape(list(x.shape), cfg)[2:]):
        raise _invalid(op, "weight", f"the dilated kernel is larger than the padded input {list(x.shape)}")


def _dw_args(direction, layout, x_shape, dtype, cfg):
    a = _capi.dwconv_args()
    a.direction = direction
    a.layout = layout
    a.dtype = _DTYPES[dtype]
    a.n, a.c = x_shape[0], x_shape[1]
    if len(x_shape) == 3:
        a.w = x_shape[2]
    else:
        a.h, a.w = x_shape[2], x_shape[3]
    (a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.dilation_h, a.dilation_w,
     a.pad_top, a.pad_bottom, a.pad_left, a.pad_right, a.causal, a.deterministic) = cfg[:12]
    a.activation = cfg[12] if len(cfg) > 12 else _capi.ACT_NONE
    return a


def _dw_forward(op, x, weight, bias, cfg):
    _check_conv(op, x, weight, bias, cfg)
    layout = _layout_of(op, "x", x)
    weight = weight.contiguous()
    y = _empty_layout(_out_shape(list(x.shape), cfg), layout, x)
    if y.numel() == 0:
        return y
    a = _dw_args(_capi.FORWARD, layout, x.shape, x.dtype, cfg)
    a.x = x.data_ptr()
    a.weight = weight.data_ptr()
    a.y = y.data_ptr()
    if bias is not None:
        a.bias = bias.contiguous().data_ptr()
    _run(_capi.dwconv, a, x.get_device())
    return y


def _activated(cfg):
    return len(cfg) > 12 and cfg[12] != _capi.ACT_NONE


def _dw_backward_data(dy, weight, x_shape, layout, cfg, x=None, bias=None):
    """dx; with an activation in cfg, from dy * act'(conv(x) + bias) (x and the forward's bias needed)."""
    x_shape = list(x_shape)
    dy = _to_layout(dy, layout)
    weight = weight.contiguous()
    dx = _empty_layout(x_shape, layout, dy)
    if dx.numel() == 0 or dy.numel() == 0:
        return dx.zero_()
    a = _dw_args(_capi.BACKWARD_DATA, layout, x_shape, dy.dtype, cfg)
    a.dy = dy.data_ptr()
    a.weight = weight.data_ptr()
    a.dx = dx.data_ptr()
    if _activated(cfg):
        if x is None:
            raise _invalid("dwconv_backward_data", "x", "an activation's backward needs x")
        x = _to_layout(x, layout)
        a.x = x.data_ptr()
        if bias is not None:
            bias = bias.contiguous()
            a.bias = bias.data_ptr()
        _run(_workspace_call, a, dy.get_device())  # the gradient prep's output is workspace
    else:
        _run(_capi.dwconv, a, dy.get_device())
    return dx


def _dw_backward_weight(x, dy, cfg, with_bias, weight=None, bias=None):
    """dweight and dbias; with an activation in cfg, from dy * act'(conv(x) + bias) (weight and the
    forward's bias needed)."""
    layout = _layout_of("dwconv_backward_weight", "x", x)
    dy = _to_layout(dy, layout)
    c = x.shape[1]
    dw = torch.empty((c, cfg[0], cfg[1]), dtype=x.dtype, device=x.device)
    db = torch.empty((c if with_bias else 0,), dtype=x.dtype, device=x.device)
    if x.numel() == 0 or dy.numel() == 0:
        return dw.zero_(), db.zero_()
    a = _dw_args(_capi.BACKWARD_WEIGHT, layout, x.shape, x.dtype, cfg)
    a.x = x.data_ptr()
    a.dy = dy.data_ptr()
    a.dweight = dw.data_ptr()
    if with_bias:
        a.dbias = db.data_ptr()
    if _activated(cfg):
        if weight is None:
            raise _invalid("dwconv_backward_weight", "weight", "an activation's backward needs the weight")
        weight = weight.contiguous()
        a.weight = weight.data_ptr()
        if bias is not None:
            bias = bias.contiguous()
            a.bias = bias.data_ptr()
    _run(_workspace_call, a, x.get_device())
    return dw, db


def _workspace_call(a, stream):
    # backward_weight's partials and an activation's gradient prep: scratch from PyTorch's allocator.
    _call_with_workspace(_capi.dwconv_workspace_size, _capi.dwconv, a, stream)


class _DwConvFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, x, weight, bias, cfg):
        y = _dw_forward(op, x, weight, bias, cfg)
        ctx.save_for_backward(x, weight, bias)  # bias: an activation's backward recomputes conv(x) + bias
        ctx.cfg, ctx.has_bias = cfg, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx = dw = db = None
        if need[1]:
            dx = _dw_backward_data(dy, weight, x.shape, _layout_of("dwconv", "x", x), ctx.cfg, x, bias)
        if need[2] or (need[3] and ctx.has_bias):
            dw, db = _dw_backward_weight(x, dy, ctx.cfg, ctx.has_bias, weight, bias)
            dw = dw.view(weight.shape)
            db = db if ctx.has_bias else None
        return None, dx, dw, db, None


def _pair(v, name, op):
    if isinstance(v, int):
        return [v, v]
    v = [int(e) for e in v]
    if len(v) != 2:
        raise _invalid(op, name, f"{name} must be an int or two ints, got {v}")
    return v


def _same_padding(kernel, dilation):
    total = dilation * (kernel - 1)
    return [total // 2, total - total // 2]  # PyTorch puts the odd element after


def _padding_1d(padding, kernel, dilation, op):
    if isinstance(padding, str):
        if padding == "valid":
            return [0, 0]
        if padding == "same":
            return _same_padding(kernel, dilation)
        raise _invalid(op, "padding", f"padding must be an int, (left, right), 'same' or 'valid', got {padding!r}")
    if isinstance(padding, int):
        return [padding, padding]
    p = [int(e) for e in padding]
    if len(p) == 1:
        return [p[0], p[0]]
    if len(p) != 2:
        raise _invalid(op, "padding", f"padding must be an int or (left, right), got {p}")
    return p


def _padding_2d(padding, kernel, dilation, op):
    """[top, bottom, left, right] from an int, (h, w), (top, bottom, left, right), 'same' or 'valid'."""
    if isinstance(padding, str):
        if padding == "valid":
            return [0, 0, 0, 0]
        if padding == "same":
            return _same_padding(kernel[0], dilation[0]) + _same_padding(kernel[1], dilation[1])
        raise _invalid(op, "padding", f"padding must be an int, (h, w), (top, bottom, left, right), 'same' or "
                       f"'valid', got {padding!r}")
    if isinstance(padding, int):
        return [padding] * 4
    p = [int(e) for e in padding]
    if len(p) == 2:
        return [p[0], p[0], p[1], p[1]]
    if len(p) != 4:
        raise _invalid(op, "padding", f"padding must have 1, 2 or 4 elements, got {p}")
    return p


def _kernel_1d(weight, op):
    if weight.dim() == 3 and weight.shape[1] == 1:
        return weight.shape[2]
    if weight.dim() == 2:
        return weight.shape[1]
    raise _invalid(op, "weight", f"weight must be [C, 1, K] or [C, K] (depthwise), got {list(weight.shape)}")


def _kernel_2d(weight, op):
    if weight.dim() == 4 and weight.shape[1] == 1:
        return [weight.shape[2], weight.shape[3]]
    if weight.dim() == 3:
        return [weight.shape[1], weight.shape[2]]
    raise _invalid(op, "weight", f"weight must be [C, 1, KH, KW] or [C, KH, KW] (depthwise), got {list(weight.shape)}")


def _cfg_1d(kernel, stride, pads, dilation, causal, deterministic, activation=0):
    return [1, int(kernel), 1, int(stride), 1, int(dilation), 0, 0, int(pads[0]), int(pads[1]), int(bool(causal)),
            int(bool(deterministic)), int(activation)]


def _cfg_2d(kernel, stride, pads, dilation, deterministic, activation=0):
    return [int(kernel[0]), int(kernel[1]), stride[0], stride[1], dilation[0], dilation[1], pads[0], pads[1], pads[2],
            pads[3], 0, int(bool(deterministic)), int(activation)]


def _dwconv(op, x, weight, bias, cfg):
    if _needs_grad(x, weight, bias):
        return _DwConvFunction.apply(op, x, weight, bias, cfg)
    return _dw_forward(op, x, weight, bias, cfg)


def dwconv1d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: int = 1,
             padding: Union[int, Sequence[int], str] = 0, dilation: int = 1, deterministic: bool = True,
             activation: Optional[str] = None) -> torch.Tensor:
    """Depthwise F.conv1d (groups = channels): x [N, C, L] contiguous (NCL) or with channels-last
    strides (NLC: x.transpose(1, 2) of a contiguous [N, L, C]); weight [C, 1, K] or [C, K]. padding:
    an int, (left, right), 'same' or 'valid'. The output has x's memory format. activation: None,
    'silu', 'gelu', 'gelu_tanh' or 'relu', fused (act(conv(x) + bias))."""
    k = _kernel_1d(weight, "dwconv1d")
    pads = _padding_1d(padding, k, int(dilation), "dwconv1d")
    act = _activation_code("dwconv1d", activation)
    if _traced(x):
        return torch.ops.kvtune.dwconv1d(_op_conv_input(x), weight, bias, int(stride), pads, int(dilation),
                                         bool(deterministic), act)
    return _dwconv("dwconv1d", x, weight, bias, _cfg_1d(k, stride, pads, dilation, False, deterministic, act))


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, dilation: int = 1,
                  deterministic: bool = True, activation: Optional[str] = None,
                  initial_states: Optional[torch.Tensor] = None, return_final_states: bool = False,
                  seq_idx: Optional[torch.Tensor] = None, final_states_out: Optional[torch.Tensor] = None):
    """Causal depthwise conv1d (Mamba's): left padding (K - 1) * dilation, none on the right, so the
    output has x's length; equal to F.conv1d(x, w, b, padding=(K-1)*dilation, groups=C)[..., :L].
    activation='silu' is Mamba's causal_conv1d(..., activation="silu"), fused with its backward.
    As causal-conv1d's causal_conv1d_fn: initial_states [N, C, (K-1)*dilation] (the inputs before
    position 0; differentiable), return_final_states (returns (y, final_states), the last
    (K-1)*dilation inputs: causal_conv1d_update's conv_state as it is), final_states_out (a tensor they
    are written into), seq_idx (int32 [N, L]: packed sequences, no window crosses a change; not with
    initial_states). kvtune/_states.py has the details."""
    k = _kernel_1d(weight, "causal_conv1d")
    act = _activation_code("causal_conv1d", activation)
    if initial_states is not None or return_final_states or seq_idx is not None or final_states_out is not None:
        return _causal_conv1d_states(x, weight, bias, _cfg_1d(k, 1, (0, 0), dilation, True, deterministic, act),
                                     initial_states, return_final_states, seq_idx, final_states_out)
    if _traced(x):
        return torch.ops.kvtune.causal_conv1d(_op_conv_input(x), weight, bias, int(dilation), bool(deterministic), act)
    return _dwconv("causal_conv1d", x, weight, bias, _cfg_1d(k, 1, (0, 0), dilation, True, deterministic, act))


def dwconv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
             stride: Union[int, Sequence[int]] = 1, padding: Union[int, Sequence[int], str] = 0,
             dilation: Union[int, Sequence[int]] = 1, deterministic: bool = True,
             activation: Optional[str] = None) -> torch.Tensor:
    """Depthwise F.conv2d (groups = channels): x [N, C, H, W] contiguous (NCHW) or channels_last
    (NHWC); weight [C, 1, KH, KW] or [C, KH, KW]. padding: an int, (h, w), (top, bottom, left,
    right), 'same' or 'valid'. The output has x's memory format. activation: as dwconv1d's."""
    k = _kernel_2d(weight, "dwconv2d")
    stride = _pair(stride, "stride", "dwconv2d")
    dilation = _pair(dilation, "dilation", "dwconv2d")
    pads = _padding_2d(padding, k, dilation, "dwconv2d")
    act = _activation_code("dwconv2d", activation)
    if _traced(x):
        return torch.ops.kvtune.dwconv2d(_op_conv_input(x), weight, bias, stride, pads, dilation, bool(deterministic), act)
    return _dwconv("dwconv2d", x, weight, bias, _cfg_2d(k, stride, pads, dilation, deterministic, act))


# The decode step (kvtune/_decode.py), over the same checks, activations and stream; its custom op
# (torch >= 2.4) is registered there, since it mutates conv_state.
from ._decode import make as _make_decode  # noqa: E402

causal_conv1d_update = _make_decode(_check_tensor, _activation_code, _invalid, _run, _traced, HAS_CUSTOM_OPS)

# causal_conv1d's states and packed sequences (kvtune/_states.py), over this module's helpers.
from ._states import make as _make_states  # noqa: E402

_causal_conv1d_states = _make_states(globals())


# ---- torch.library registration (torch >= 2.4) -----------------------------------------------

if HAS_CUSTOM_OPS:
    from ._ops import register as _register

    _register(globals())
