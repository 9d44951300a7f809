"""torch.library registration of kvtune's operators (torch >= 2.4): the custom ops, their fake
(meta) kernels for torch.compile, and their autograd. The kernels are kvtune.torch's eager ones.

  kvtune::layer_norm(Tensor x, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor y, Tensor mean, Tensor rstd)
  kvtune::rms_norm(Tensor x, int[] normalized_shape, Tensor? weight, float eps) -> (Tensor y, Tensor mean (empty), Tensor rstd)
  kvtune::standardize(Tensor x, float eps, int ddof) -> (Tensor y, Tensor mean, Tensor rstd)
  kvtune::add_norm(Tensor x, Tensor residual, int mode, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps, int ddof) -> (Tensor y, Tensor s, Tensor mean, Tensor rstd)
  kvtune::norm_backward(Tensor x, Tensor dy, Tensor? weight, Tensor mean, Tensor rstd, int mode, int cols, float eps, int ddof, bool need_weight, bool need_bias, Tensor? ds) -> (Tensor dx, Tensor dweight (flat, empty unless asked), Tensor dbias (same))
  kvtune::dwconv1d(Tensor x, Tensor weight, Tensor? bias, int stride, int[] padding, int dilation, bool deterministic, int activation) -> Tensor
  kvtune::causal_conv1d(Tensor x, Tensor weight, Tensor? bias, int dilation, bool deterministic, int activation) -> Tensor
  kvtune::dwconv2d(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, bool deterministic, int activation) -> Tensor
  kvtune::dwconv_backward_data(Tensor dy, Tensor weight, int[] x_shape, int x_layout, int[] cfg, Tensor? x, Tensor? bias) -> Tensor
  kvtune::dwconv_backward_weight(Tensor x, Tensor dy, int[] cfg, bool with_bias, Tensor? weight, Tensor? bias) -> (Tensor dweight, Tensor dbias)

mean and rstd are [rows] f32 (rows = x.numel() / prod(normalized_shape)); add_norm's s = x + residual
and y = norm(s) (mode: the C ABI's kvt_norm_mode; standardize normalizes the last dimension and
ignores normalized_shape); norm_backward's ds, when given, is added to dx; the dwconv outputs have
x's memory format; `cfg` is kvtune.torch's convolution geometry list; `activation` the C ABI's
kvt_activation value (0: none). With an activation the backward ops take the forward's x and bias
(backward_data) or weight and bias (backward_weight) to recompute conv(x) + bias.
"""

import inspect
import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _capi


def register(kt):
    """Registers the ops; `kt` is kvtune.torch's namespace (a dict)."""
    if "tags" in inspect.signature(torch.library.custom_op).parameters:
        # torch < 2.8 lets Inductor hand a custom op other strides than eager's unless told not to.
        def custom_op(name, mutates_args):
            return torch.library.custom_op(name, mutates_args=mutates_args,
                                           tags=(torch.Tag.needs_fixed_stride_order,))
    else:
        custom_op = torch.library.custom_op
    norm_strides_supported = kt["norm_strides_supported"]

    # Under torch.compile a custom op may still meet strides kvtune cannot take: it copies then
    # (the eager functions raise instead, so that a copy is never silent there). The traced
    # convolution functions copy before the op already (kvtune.torch._op_conv_input); this is the
    # fallback for a direct torch.ops.kvtune call.
    def norm_input(x, cols):
        return x if norm_strides_supported(x, cols) else x.contiguous()

    conv_input = kt["_op_conv_input"]
    norm_forward, norm_backward = kt["_norm_forward"], kt["_norm_backward"]
    normalized_cols, check_tensor = kt["_normalized_cols"], kt["_check_tensor"]

    def stats_like(x, rows, with_mean):
        mean = x.new_empty((rows if with_mean else 0,), dtype=torch.float32)
        return mean, x.new_empty((rows,), dtype=torch.float32)

    def needs(ctx, count):
        return getattr(ctx, "needs_input_grad", (True,) * count)

    # ---- normalization ----

    # The backward as an op of its own, so that AOTAutograd traces the registered autograd formulas
    # below with fake tensors (its fake kernel) and runs kvtune's kernel in the compiled graph.
    @custom_op("kvtune::norm_backward", mutates_args=())
    def norm_backward_op(x: Tensor, dy: Tensor, weight: Optional[Tensor], mean: Tensor, rstd: Tensor, mode: int,
                         cols: int, eps: float, ddof: int, need_weight: bool,
                         need_bias: bool, ds: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
        dx, dw, db = norm_backward(mode, norm_input(x, cols), cols, weight, mean, rstd, eps, ddof, dy, True,
                                   need_weight, need_bias, ds)
        empty = x.new_empty((0,))
        return dx, empty if dw is None else dw, empty.clone() if db is None else db

    @norm_backward_op.register_fake
    def _(x, dy, weight, mean, rstd, mode, cols, eps, ddof, need_weight, need_bias, ds):
        return (x.new_empty(x.shape), x.new_empty((cols if need_weight and weight is not None else 0,)),
                x.new_empty((cols if need_bias else 0,)))

    def run_norm_backward(mode, ctx, x, dy, weight, mean, rstd, cols, eps, ddof, need_weight, need_bias, ds=None):
        need_weight = bool(need_weight and weight is not None)
        dx, dw, db = torch.ops.kvtune.norm_backward(x, dy, weight, mean, rstd, mode, cols, eps, ddof, need_weight,
                                                    bool(need_bias), ds)
        return dx, dw.view(weight.shape) if need_weight else None, db if need_bias else None

    def add_norm_cols(x, mode, normalized_shape):
        if mode == _capi.STANDARDIZE:
            if x.dim() == 0:
                raise kt["_invalid"]("add_standardize", "x", "x must have at least one dimension")
            return x.shape[-1]
        return normalized_cols("add_" + kt["_OP_OF_MODE"][mode], x, normalized_shape)

    @custom_op("kvtune::add_norm", mutates_args=())
    def add_norm(x: Tensor, residual: Tensor, mode: int, normalized_shape: List[int], weight: Optional[Tensor],
                 bias: Optional[Tensor], eps: float, ddof: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        cols = add_norm_cols(x, mode, normalized_shape)
        y, mean, rstd, s = norm_forward(mode, norm_input(x, cols), cols, weight, bias, eps, ddof, True,
                                        norm_input(residual, cols))
        return y, s, mean, rstd

    @add_norm.register_fake
    def _(x, residual, mode, normalized_shape, weight, bias, eps, ddof):
        check_tensor("add_norm", "x", x)
        cols = add_norm_cols(x, mode, normalized_shape)
        mean, rstd = stats_like(x, x.numel() // cols, mode != _capi.RMSNORM)
        return x.new_empty(x.shape), x.new_empty(x.shape), mean, rstd

    def add_norm_setup(ctx, inputs, output):
        x, residual, mode, normalized_shape, weight, bias, eps, ddof = inputs
        _, s, mean, rstd = output
        ctx.save_for_backward(s, weight, mean, rstd)
        ctx.mode, ctx.cols, ctx.eps, ctx.ddof = mode, add_norm_cols(x, mode, normalized_shape), eps, ddof
        ctx.bias_shape = None if bias is None else bias.shape

    def add_norm_backward(ctx, dy, ds, _dmean, _drstd):
        s, weight, mean, rstd = ctx.saved_tensors
        need = needs(ctx, 8)
        if dy is None:
            dy = torch.zeros_like(s)
        dx, dw, db = run_norm_backward(ctx.mode, ctx, s, dy, weight, mean, rstd, ctx.cols, ctx.eps, ctx.ddof,
                                       need[4], need[5] and ctx.bias_shape is not None, ds)
        return (dx if need[0] else None, dx if need[1] else None, None, None, dw,
                None if db is None else db.view(ctx.bias_shape), None, None)

    add_norm.register_autograd(add_norm_backward, setup_context=add_norm_setup)

    @custom_op("kvtune::layer_norm", mutates_args=())
    def layer_norm(x: Tensor, normalized_shape: List[int], weight: Optional[Tensor], bias: Optional[Tensor],
                   eps: float) -> Tuple[Tensor, Tensor, Tensor]:
        cols = normalized_cols("layer_norm", x, normalized_shape)
        return norm_forward(_capi.LAYERNORM, norm_input(x, cols), cols, weight, bias, eps, 0, True)

    @layer_norm.register_fake
    def _(x, normalized_shape, weight, bias, eps):
        check_tensor("layer_norm", "x", x)
        cols = normalized_cols("layer_norm", x, normalized_shape)
        return (x.new_empty(x.shape),) + stats_like(x, x.numel() // cols, True)

    def layer_norm_setup(ctx, inputs, output):
        x, normalized_shape, weight, bias, eps = inputs
        _, mean, rstd = output
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.cols, ctx.eps = math.prod(normalized_shape), eps
        ctx.bias_shape = None if bias is None else bias.shape

    def layer_norm_backward(ctx, dy, _dmean, _drstd):
        x, weight, mean, rstd = ctx.saved_tensors
        need = needs(ctx, 5)
        dx, dw, db = run_norm_backward(_capi.LAYERNORM, ctx, x, dy, weight, mean, rstd, ctx.cols, ctx.eps, 0, need[2],
                                       need[3] and ctx.bias_shape is not None)
        return dx if need[0] else None, None, dw, None if db is None else db.view(ctx.bias_shape), None

    layer_norm.register_autograd(layer_norm_backward, setup_context=layer_norm_setup)

    @custom_op("kvtune::rms_norm", mutates_args=())
    def rms_norm(x: Tensor, normalized_shape: List[int], weight: Optional[Tensor], eps: float) -> Tuple[Tensor, Tensor, Tensor]:
        cols = normalized_cols("rms_norm", x, normalized_shape)
        return norm_forward(_capi.RMSNORM, norm_input(x, cols), cols, weight, None, eps, 0, True)

    @rms_norm.register_fake
    def _(x, normalized_shape, weight, eps):
        check_tensor("rms_norm", "x", x)
        cols = normalized_cols("rms_norm", x, normalized_shape)
        return (x.new_empty(x.shape),) + stats_like(x, x.numel() // cols, False)

    def rms_norm_setup(ctx, inputs, output):
        x, normalized_shape, weight, eps = inputs
        _, mean, rstd = output
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.cols, ctx.eps = math.prod(normalized_shape), eps

    def rms_norm_backward(ctx, dy, _dmean, _drstd):
        x, weight, mean, rstd = ctx.saved_tensors
        need = needs(ctx, 4)
        dx, dw, _ = run_norm_backward(_capi.RMSNORM, ctx, x, dy, weight, mean, rstd, ctx.cols, ctx.eps, 0, need[2],
                                      False)
        return dx if need[0] else None, None, dw, None

    rms_norm.register_autograd(rms_norm_backward, setup_context=rms_norm_setup)

    @custom_op("kvtune::standardize", mutates_args=())
    def standardize(x: Tensor, eps: float, ddof: int) -> Tuple[Tensor, Tensor, Tensor]:
        return norm_forward(_capi.STANDARDIZE, norm_input(x, x.shape[-1]), x.shape[-1], None, None, eps, ddof, True)

    @standardize.register_fake
    def _(x, eps, ddof):
        check_tensor("standardize", "x", x)
        return (x.new_empty(x.shape),) + stats_like(x, x.numel() // x.shape[-1], True)

    def standardize_setup(ctx, inputs, output):
        x, eps, ddof = inputs
        _, mean, rstd = output
        ctx.save_for_backward(x, mean, rstd)
        ctx.eps, ctx.ddof = eps, ddof

    def standardize_backward(ctx, dy, _dmean, _drstd):
        x, mean, rstd = ctx.saved_tensors
        dx, _, _ = run_norm_backward(_capi.STANDARDIZE, ctx, x, dy, None, mean, rstd, x.shape[-1], ctx.eps, ctx.ddof,
                                     False, False)
        return dx, None, None

    standardize.register_autograd(standardize_backward, setup_context=standardize_setup)

    # ---- depthwise convolution ----

    dw_forward, layout_of, empty_layout = kt["_dw_forward"], kt["_layout_of"], kt["_empty_layout"]
    out_shape, check_conv = kt["_out_shape"], kt["_check_conv"]
    cfg_1d, cfg_2d, kernel_1d, kernel_2d = kt["_cfg_1d"], kt["_cfg_2d"], kt["_kernel_1d"], kt["_kernel_2d"]

    @custom_op("kvtune::dwconv_backward_data", mutates_args=())
    def dwconv_backward_data(dy: Tensor, weight: Tensor, x_shape: List[int], x_layout: int, cfg: List[int],
                             x: Optional[Tensor], bias: Optional[Tensor]) -> Tensor:
        return kt["_dw_backward_data"](dy, weight, x_shape, x_layout, cfg, x, bias)

    @dwconv_backward_data.register_fake
    def _(dy, weight, x_shape, x_layout, cfg, x, bias):
        return empty_layout(list(x_shape), x_layout, dy)

    @custom_op("kvtune::dwconv_backward_weight", mutates_args=())
    def dwconv_backward_weight(x: Tensor, dy: Tensor, cfg: List[int], with_bias: bool, weight: Optional[Tensor],
                               bias: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        return kt["_dw_backward_weight"](conv_input(x), dy, cfg, with_bias, weight, bias)

    @dwconv_backward_weight.register_fake
    def _(x, dy, cfg, with_bias, weight, bias):
        c = x.shape[1]
        return x.new_empty((c, cfg[0], cfg[1])), x.new_empty((c if with_bias else 0,))

    def conv_backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        need = needs(ctx, 3)
        dx = dw = db = None
        if need[0]:
            x_layout = layout_of("dwconv", "x", conv_input(x))
            dx = torch.ops.kvtune.dwconv_backward_data(dy, weight, list(x.shape), x_layout, ctx.cfg, x, bias)
        if need[1] or (ctx.has_bias and need[2]):
            dw, db = torch.ops.kvtune.dwconv_backward_weight(x, dy, ctx.cfg, ctx.has_bias, weight, bias)
            dw = dw.view(weight.shape)
            db = db if ctx.has_bias else None
        return dx, dw, db

    def conv_fake(op, x, weight, bias, cfg):
        check_conv(op, x, weight, bias, cfg)
        return empty_layout(out_shape(list(x.shape), cfg), layout_of(op, "x", conv_input(x)), x)

    def conv_setup(ctx, x, weight, bias, cfg):
        ctx.save_for_backward(x, weight, bias)  # bias: an activation's backward recomputes conv(x) + bias
        ctx.cfg, ctx.has_bias = cfg, bias is not None

    @custom_op("kvtune::dwconv1d", mutates_args=())
    def dwconv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor], stride: int, padding: List[int], dilation: int,
                 deterministic: bool, activation: int) -> Tensor:
        cfg = cfg_1d(kernel_1d(weight, "dwconv1d"), stride, padding, dilation, False, deterministic, activation)
        return dw_forward("dwconv1d", conv_input(x), weight, bias, cfg)

    @dwconv1d.register_fake
    def _(x, weight, bias, stride, padding, dilation, deterministic, activation):
        cfg = cfg_1d(kernel_1d(weight, "dwconv1d"), stride, padding, dilation, False, deterministic, activation)
        return conv_fake("dwconv1d", x, weight, bias, cfg)

    def dwconv1d_setup(ctx, inputs, output):
        x, weight, bias, stride, padding, dilation, deterministic, activation = inputs
        conv_setup(ctx, x, weight, bias,
                   cfg_1d(kernel_1d(weight, "dwconv1d"), stride, padding, dilation, False, deterministic, activation))

    dwconv1d.register_autograd(lambda ctx, dy: conv_backward(ctx, dy) + (None,) * 5, setup_context=dwconv1d_setup)

    @custom_op("kvtune::causal_conv1d", mutates_args=())
    def causal_conv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor], dilation: int, deterministic: bool,
                      activation: int) -> Tensor:
        cfg = cfg_1d(kernel_1d(weight, "causal_conv1d"), 1, (0, 0), dilation, True, deterministic, activation)
        return dw_forward("causal_conv1d", conv_input(x), weight, bias, cfg)

    @causal_conv1d.register_fake
    def _(x, weight, bias, dilation, deterministic, activation):
        cfg = cfg_1d(kernel_1d(weight, "causal_conv1d"), 1, (0, 0), dilation, True, deterministic, activation)
        return conv_fake("causal_conv1d", x, weight, bias, cfg)

    def causal_conv1d_setup(ctx, inputs, output):
        x, weight, bias, dilation, deterministic, activation = inputs
        conv_setup(ctx, x, weight, bias, cfg_1d(kernel_1d(weight, "causal_conv1d"), 1, (0, 0), dilation, True,
                                                deterministic, activation))

    causal_conv1d.register_autograd(lambda ctx, dy: conv_backward(ctx, dy) + (None,) * 3,
                                    setup_context=causal_conv1d_setup)

    @custom_op("kvtune::dwconv2d", mutates_args=())
    def dwconv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor], stride: List[int], padding: List[int],
                 dilation: List[int], deterministic: bool, activation: int) -> Tensor:
        cfg = cfg_2d(kernel_2d(weight, "dwconv2d"), stride, padding, dilation, deterministic, activation)
        return dw_forward("dwconv2d", conv_input(x), weight, bias, cfg)

    @dwconv2d.register_fake
    def _(x, weight, bias, stride, padding, dilation, deterministic, activation):
        cfg = cfg_2d(kernel_2d(weight, "dwconv2d"), stride, padding, dilation, deterministic, activation)
        return conv_fake("dwconv2d", x, weight, bias, cfg)

    def dwconv2d_setup(ctx, inputs, output):
        x, weight, bias, stride, padding, dilation, deterministic, activation = inputs
        conv_setup(ctx, x, weight, bias, cfg_2d(kernel_2d(weight, "dwconv2d"), stride, padding, dilation,
                                                deterministic, activation))

    dwconv2d.register_autograd(lambda ctx, dy: conv_backward(ctx, dy) + (None,) * 5, setup_context=dwconv2d_setup)
