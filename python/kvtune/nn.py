"""Drop-in modules over kvtune.torch, and patch(model) to swap them into a model.

Each module subclasses its torch.nn counterpart (same constructor, parameters, initialization and
state_dict keys; isinstance checks still hold) and replaces only forward():

  LayerNorm         torch.nn.LayerNorm
  RMSNorm           torch.nn.RMSNorm (torch >= 2.4; on older torch a module with the same state_dict)
  DepthwiseConv1d   torch.nn.Conv1d with groups == in_channels == out_channels, padding_mode 'zeros'
  DepthwiseConv2d   torch.nn.Conv2d likewise
  CausalConv1d      a depthwise Conv1d whose output keeps the input length (left padding only), the
                    state_dict of nn.Conv1d(C, C, K, groups=C, padding=(K-1)*dilation)

Inputs whose strides kvtune cannot take (e.g. a permuted view) are made contiguous first (a copy);
CPU tensors and float64 raise kvtune.InvalidArgumentError, as the functions do.
"""

import inspect

import torch
import torch.nn as tnn

from . import torch as kt

__all__ = ["LayerNorm", "RMSNorm", "DepthwiseConv1d", "DepthwiseConv2d", "CausalConv1d", "patch", "PatchReport"]


def _cast(t, dtype):
    return t if t is None or t.dtype == dtype else t.to(dtype)


class LayerNorm(tnn.LayerNorm):
    """torch.nn.LayerNorm on kvtune."""

    def forward(self, x):
        shape = self.normalized_shape
        cols = 1
        for s in shape:
            cols *= s
        if not kt._traced(x) and not kt.norm_strides_supported(x, cols):
            x = x.contiguous()
        return kt.layer_norm(x, shape, _cast(self.weight, x.dtype), _cast(self.bias, x.dtype), self.eps)


_TorchRMSNorm = getattr(tnn, "RMSNorm", None)

if _TorchRMSNorm is not None:
    class RMSNorm(_TorchRMSNorm):
        """torch.nn.RMSNorm on kvtune (eps None: torch.finfo(x.dtype).eps)."""

        def forward(self, x):
            return _rms_forward(self, x)
else:  # torch < 2.4: the same constructor and state_dict as torch.nn.RMSNorm
    class RMSNorm(tnn.Module):
        """RMSNorm on kvtune (torch.nn.RMSNorm's constructor and state_dict)."""

        def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
            super().__init__()
            if isinstance(normalized_shape, int):
                normalized_shape = (normalized_shape,)
            self.normalized_shape = tuple(normalized_shape)
            self.eps = eps
            self.elementwise_affine = elementwise_affine
            if elementwise_affine:
                self.weight = tnn.Parameter(torch.ones(self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("weight", None)

        def forward(self, x):
            return _rms_forward(self, x)

        def extra_repr(self):
            return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


def _rms_forward(module, x):
    cols = 1
    for s in module.normalized_shape:
        cols *= s
    if not kt._traced(x) and not kt.norm_strides_supported(x, cols):
        x = x.contiguous()
    return kt.rms_norm(x, module.normalized_shape, _cast(module.weight, x.dtype), module.eps)


def _depthwise_reason(conv):
    """Why a torch.nn.Conv1d/Conv2d is not a kvtune depthwise convolution ("" when it is)."""
    if conv.groups != conv.in_channels or conv.out_channels != conv.in_channels:
        return (f"not depthwise with multiplier 1 (in_channels={conv.in_channels}, out_channels={conv.out_channels}, "
                f"groups={conv.groups})")
    if conv.padding_mode != "zeros":
        return f"padding_mode={conv.padding_mode!r} (kvtune pads with zeros)"
    if getattr(conv, "transposed", False):
        return "transposed convolution"
    return ""


def _padding(conv):
    return conv.padding if isinstance(conv.padding, str) else tuple(conv.padding)


def _activation(module, activation):
    """The module's fused activation (None, 'silu', 'gelu', 'gelu_tanh', 'relu'), checked now."""
    kt._activation_code(f"kvtune.nn.{type(module).__name__}", activation)
    return activation


class DepthwiseConv1d(tnn.Conv1d):
    """torch.nn.Conv1d(C, C, K, groups=C) on kvtune; NCL or channels-last (NLC) inputs. activation=
    (keyword, default None): 'silu', 'gelu', 'gelu_tanh' or 'relu' fused after the bias."""

    def __init__(self, *args, activation=None, **kwargs):
        super().__init__(*args, **kwargs)
        reason = _depthwise_reason(self)
        if reason:
            raise ValueError(f"kvtune.nn.DepthwiseConv1d: {reason}")
        self.deterministic = True
        self.activation = _activation(self, activation)

    def forward(self, x):
        if not kt._traced(x) and x.dim() == 3 and not kt.layout_supported(x):
            x = x.contiguous()
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return kt.dwconv1d(x, _cast(self.weight, x.dtype), _cast(self.bias, x.dtype), self.stride[0], padding,
                           self.dilation[0], self.deterministic, self.activation)


class DepthwiseConv2d(tnn.Conv2d):
    """torch.nn.Conv2d(C, C, K, groups=C) on kvtune; NCHW or channels_last inputs. activation= as
    DepthwiseConv1d's."""

    def __init__(self, *args, activation=None, **kwargs):
        super().__init__(*args, **kwargs)
        reason = _depthwise_reason(self)
        if reason:
            raise ValueError(f"kvtune.nn.DepthwiseConv2d: {reason}")
        self.deterministic = True
        self.activation = _activation(self, activation)

    def forward(self, x):
        if not kt._traced(x) and x.dim() == 4 and not kt.layout_supported(x):
            x = x.contiguous()
        return kt.dwconv2d(x, _cast(self.weight, x.dtype), _cast(self.bias, x.dtype), list(self.stride), _padding(self),
                           list(self.dilation), self.deterministic, self.activation)


class CausalConv1d(tnn.Conv1d):
    """Causal depthwise conv1d (Mamba's): CausalConv1d(channels, kernel_size, dilation=1, bias=True,
    activation=None). Output length = input length; the state_dict of nn.Conv1d(C, C, K, groups=C,
    padding=(K-1)*dilation). activation='silu' is Mamba's conv followed by SiLU, fused."""

    def __init__(self, channels, kernel_size, dilation=1, bias=True, device=None, dtype=None, activation=None):
        super().__init__(channels, channels, kernel_size, stride=1, padding=0, dilation=dilation, groups=channels,
                         bias=bias, device=device, dtype=dtype)
        self.deterministic = True
        self.activation = _activation(self, activation)

    def forward(self, x):
        if not kt._traced(x) and x.dim() == 3 and not kt.layout_supported(x):
            x = x.contiguous()
        return kt.causal_conv1d(x, _cast(self.weight, x.dtype), _cast(self.bias, x.dtype), self.dilation[0],
                                self.deterministic, self.activation)


# ---- patch ----------------------------------------------------------------------------------

class PatchReport:
    """What patch() swapped and what it left. `swapped`: (name, old type, new type); `left`:
    (name, type, reason)."""

    def __init__(self):
        self.swapped = []
        self.left = []

    def __repr__(self):
        return f"PatchReport(swapped={len(self.swapped)}, left={len(self.left)})"

    def __str__(self):
        lines = [f"kvtune.nn.patch: swapped {len(self.swapped)}, left {len(self.left)}"]
        lines += [f"  swapped {name or '<root>'}: {old} -> {new}" for name, old, new in self.swapped]
        lines += [f"  left    {name or '<root>'}: {typ} ({why})" for name, typ, why in self.left]
        return "\n".join(lines)


_SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _dtype_reason(module):
    for p in module.parameters(recurse=False):
        if p.dtype not in _SUPPORTED_DTYPES:
            return f"parameters of dtype {p.dtype} (kvtune supports float32, float16, bfloat16)"
    return ""


def _adopt(new, old):
    """Gives `new` the very parameter objects of `old` (optimizers holding them keep working), and
    its training flag."""
    for name, p in old.named_parameters(recurse=False):
        setattr(new, name, p)
    for name, b in old.named_buffers(recurse=False):
        setattr(new, name, b)
    new.train(old.training)
    return new


def _replacement(module):
    """(new module, "") or (None, reason) for a module patch() looks at; (None, None) to ignore it."""
    t = type(module)
    if isinstance(module, (LayerNorm, RMSNorm, DepthwiseConv1d, DepthwiseConv2d, CausalConv1d)):
        return None, None  # already kvtune's
    if t is tnn.LayerNorm:
        why = _dtype_reason(module)
        if why:
            return None, why
        extra = {"bias": module.bias is not None} if _LAYERNORM_HAS_BIAS and module.elementwise_affine else {}
        new = LayerNorm(module.normalized_shape, module.eps, module.elementwise_affine, device="meta", **extra)
        return _adopt(new, module), ""
    if _TorchRMSNorm is not None and t is _TorchRMSNorm:
        why = _dtype_reason(module)
        if why:
            return None, why
        new = RMSNorm(module.normalized_shape, module.eps, module.elementwise_affine, device="meta")
        return _adopt(new, module), ""
    if t in (tnn.Conv1d, tnn.Conv2d):
        why = _depthwise_reason(module) or _dtype_reason(module)
        if why:
            return None, why
        cls = DepthwiseConv1d if t is tnn.Conv1d else DepthwiseConv2d
        new = cls(module.in_channels, module.out_channels, module.kernel_size, module.stride, module.padding,
                  module.dilation, module.groups, module.bias is not None, module.padding_mode, device="meta")
        return _adopt(new, module), ""
    if isinstance(module, (tnn.LayerNorm, tnn.Conv1d, tnn.Conv2d)) or (
            _TorchRMSNorm is not None and isinstance(module, _TorchRMSNorm)):
        return None, f"a subclass of a supported type ({t.__module__}.{t.__name__}) may change forward()"
    if isinstance(module, (tnn.GroupNorm, tnn.BatchNorm1d, tnn.BatchNorm2d, tnn.Conv3d, tnn.ConvTranspose1d,
                           tnn.ConvTranspose2d)):
        return None, "no kvtune counterpart"
    return None, None


_LAYERNORM_HAS_BIAS = "bias" in inspect.signature(tnn.LayerNorm.__init__).parameters


def _type_name(t):
    return f"{t.__module__}.{t.__qualname__}"


def patch(model, verbose=False):
    """Swaps kvtune modules into `model` in place: torch.nn.LayerNorm, RMSNorm, and depthwise
    Conv1d/Conv2d (groups == in == out channels, zero padding, float32/16/bf16 parameters). The new
    modules hold the same parameter objects. Returns a PatchReport of what was swapped and what was
    left (with the reason); prints it when verbose. A model that is itself such a module cannot be
    swapped in place: it is reported as left."""
    report = PatchReport()
    made = {}  # id(old module) -> its replacement: a module reached by several names is swapped once
    for name, module in list(model.named_modules(remove_duplicate=False)):
        if id(module) in made:
            new, why = made[id(module)]
        else:
            new, why = made[id(module)] = _replacement(module)
        if why is None:
            continue
        if new is None:
            report.left.append((name, _type_name(type(module)), why))
            continue
        if name == "":
            report.left.append((name, _type_name(type(module)), "the model itself: wrap it in a container"))
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, new)
        report.swapped.append((name, _type_name(type(module)), _type_name(type(new))))
    if verbose:
        print(report)
    return report
