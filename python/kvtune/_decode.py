"""kvtune.torch.causal_conv1d_update: the decode step of a causal depthwise conv1d (Mamba-style
inference) with a rolling state updated in place (kvtune::DwConvDecodeArgs through the C ABI).

  causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                       conv_state_indices=None, overlap_prologue=False) -> y
  torch.ops.kvtune.causal_conv1d_update(x, conv_state, weight, bias, activation (the C ABI's code),
                                        cache_seqlens, conv_state_indices, overlap_prologue) -> y
                                        (torch >= 2.4)

x [batch, channels] or [batch, channels, seqlen] (seqlen <= 64 new tokens), contiguous; weight
[channels, K] or [channels, 1, K]; conv_state [slots, channels, state_len], contiguous, updated in
place. Without cache_seqlens the state holds the last K - 1 inputs (state_len == K - 1) and is shifted
by seqlen; with cache_seqlens (int32 [batch]) it is a circular buffer (input position q at q %
state_len, cache_seqlens[b] the position of row b's first new token; positions before 0 read as zero;
the caller advances cache_seqlens). conv_state_indices (int32 [batch]): each row's state slot, a
negative one padding (nothing of that row is written: its y is left uninitialized). A row whose slot
is >= slots or whose position is negative gets NaN outputs and leaves the state alone.
y = act(bias + sum_k weight[:, k] * u[t + k]) where u is the row's previous K - 1 inputs followed by
its new tokens: the same as causal_conv1d over the whole history. overlap_prologue=True (sm_90 and
later) lets the step read weight, bias and conv_state_indices while the stream's previous kernel
still runs: set it only when that kernel does not write them (DwConvDecodeArgs::overlap_prologue).
"""

from typing import Optional

import torch

from . import _capi


def _int32_rows(op, field, t, x, batch):
    if not isinstance(t, torch.Tensor) or t.dtype != torch.int32:
        raise op.invalid(field, f"{field} must be an int32 tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    if not t.is_cuda or t.get_device() != x.get_device():
        raise op.invalid(field, f"{field} is on {t.device} but x is on {x.device}")
    if t.shape != (batch,) or not t.is_contiguous():
        raise op.invalid(field, f"{field} must be a contiguous [batch] = [{batch}] tensor, got {tuple(t.shape)}")


class _Op:
    name = "causal_conv1d_update"

    def __init__(self, invalid):
        self._invalid = invalid

    def invalid(self, field, why):
        return self._invalid(self.name, field, why)


def make(check_tensor, activation_code, invalid, run, traced, has_custom_ops):
    """causal_conv1d_update over kvtune.torch's helpers (argument checks, activations, the current
    stream); with torch.library custom ops (torch >= 2.4) also ``torch.ops.kvtune.causal_conv1d_update``,
    which mutates conv_state, with a fake kernel, so that torch.compile traces the step."""
    op = _Op(invalid)

    def eager(x, conv_state, weight, bias, act, cache_seqlens, conv_state_indices, overlap_prologue):
        check_tensor(op.name, "x", x)
        check_tensor(op.name, "conv_state", conv_state, like=x)
        check_tensor(op.name, "weight", weight, like=x)
        if x.dim() not in (2, 3) or not x.is_contiguous():
            raise op.invalid("x", f"x must be a contiguous [batch, channels] or [batch, channels, seqlen] tensor, "
                                  f"got shape {tuple(x.shape)}")
        batch, channels = x.shape[0], x.shape[1]
        seqlen = x.shape[2] if x.dim() == 3 else 1
        if weight.dim() == 3 and weight.shape[1] == 1:
            weight = weight.squeeze(1)
        if weight.dim() != 2 or weight.shape[0] != channels or not weight.is_contiguous():
            raise op.invalid("weight", f"weight must be a contiguous [channels, K] or [channels, 1, K] tensor with "
                                       f"channels = {channels}, got shape {tuple(weight.shape)}")
        if conv_state.dim() != 3 or conv_state.shape[1] != channels or not conv_state.is_contiguous():
            raise op.invalid("conv_state", f"conv_state must be a contiguous [slots, channels = {channels}, "
                                           f"state_len] tensor, got shape {tuple(conv_state.shape)}")
        if bias is not None:
            check_tensor(op.name, "bias", bias, like=x)
            if bias.shape != (channels,) or not bias.is_contiguous():
                raise op.invalid("bias", f"bias must be a contiguous [{channels}] tensor, got {tuple(bias.shape)}")
        if cache_seqlens is not None:
            _int32_rows(op, "cache_seqlens", cache_seqlens, x, batch)
        if conv_state_indices is not None:
            _int32_rows(op, "conv_state_indices", conv_state_indices, x, batch)
        y = torch.empty_like(x)
        if x.numel() == 0:
            return y
        a = _capi.dwconv_decode_args()
        a.dtype = _DTYPES[x.dtype]
        a.batch, a.channels, a.seqlen, a.kernel_w = batch, channels, seqlen, weight.shape[1]
        a.activation = act
        a.state_len, a.state_slots = conv_state.shape[2], conv_state.shape[0]
        a.x, a.weight, a.y, a.state = x.data_ptr(), weight.data_ptr(), y.data_ptr(), conv_state.data_ptr()
        a.bias = bias.data_ptr() if bias is not None else None
        a.cache_seqlens = cache_seqlens.data_ptr() if cache_seqlens is not None else None
        a.state_indices = conv_state_indices.data_ptr() if conv_state_indices is not None else None
        a.overlap_prologue = 1 if overlap_prologue else 0
        run(_call, a, x.get_device())
        return y

    if has_custom_ops:
        @torch.library.custom_op("kvtune::causal_conv1d_update", mutates_args=("conv_state",))
        def _custom(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                    activation: int, cache_seqlens: Optional[torch.Tensor],
                    conv_state_indices: Optional[torch.Tensor], overlap_prologue: bool) -> torch.Tensor:
            # Inductor may hand the inputs other strides than eager's; the state is mutated where it is.
            return eager(x.contiguous(), conv_state, weight.contiguous(), None if bias is None else bias.contiguous(),
                         activation, cache_seqlens, conv_state_indices, overlap_prologue)

        @_custom.register_fake
        def _(x, conv_state, weight, bias, activation, cache_seqlens, conv_state_indices, overlap_prologue):
            return torch.empty_like(x)

    def causal_conv1d_update(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor,
                             bias: Optional[torch.Tensor] = None, activation: Optional[str] = None,
                             cache_seqlens: Optional[torch.Tensor] = None,
                             conv_state_indices: Optional[torch.Tensor] = None,
                             overlap_prologue: bool = False) -> torch.Tensor:
        act = activation_code(op.name, activation)
        overlap_prologue = bool(overlap_prologue)
        if has_custom_ops and traced(x):
            return torch.ops.kvtune.causal_conv1d_update(x, conv_state, weight, bias, act, cache_seqlens,
                                                         conv_state_indices, overlap_prologue)
        return eager(x, conv_state, weight, bias, act, cache_seqlens, conv_state_indices, overlap_prologue)

    return causal_conv1d_update


_DTYPES = {torch.float32: _capi.F32, torch.float16: _capi.F16, torch.bfloat16: _capi.BF16}


def _call(args, stream):
    _capi.dwconv_decode(args, stream)
