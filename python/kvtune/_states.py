"""kvtune.torch.causal_conv1d's states and packed sequences (kvtune::DwConvArgs initial_state,
final_state, dinitial_state and seq_idx through the C ABI), in the style of the causal-conv1d package:

  causal_conv1d(x, weight, bias=None, dilation=1, deterministic=True, activation=None,
                initial_states=None, return_final_states=False, seq_idx=None, final_states_out=None)
      -> y, or (y, final_states) with return_final_states

x [N, C, L] (NCL) or channels-last (NLC); states [N, C, S] with S = (K - 1) * dilation, x's dtype,
contiguous (the decode step's conv_state layout: a prefill's final states are its state as they are);
seq_idx int32 [N, L] contiguous (packed sequences: no window crosses a change of seq_idx; not with
initial_states). final_states_out: an [N, C, S] tensor the final states are written into (e.g. the
decode step's conv_state), returned as final_states. Autograd: x, weight, bias and initial_states (the
final states are not differentiable). Eager only: under torch.compile these arguments are refused.
"""

import torch

from . import _capi


def make(kt):
    """The states path of causal_conv1d over kvtune.torch's helpers (`kt`: its module globals)."""
    invalid = kt["_invalid"]
    op = "causal_conv1d"

    def check_state(field, t, x, shape):
        kt["_check_tensor"](op, field, t, like=x)
        if tuple(t.shape) != shape:
            raise invalid(op, field, f"{field} must be [batch, channels, (K - 1) * dilation] = {list(shape)}, "
                                     f"got {list(t.shape)}")
        if not t.is_contiguous():
            raise invalid(op, field, f"{field} must be contiguous")

    def check(x, weight, bias, cfg, initial_states, seq_idx, final_states_out):
        kt["_check_conv"](op, x, weight, bias, cfg)
        layout = kt["_layout_of"](op, "x", x)
        n, c, length = x.shape
        shape = (n, c, (cfg[1] - 1) * cfg[5])
        if initial_states is not None:
            check_state("initial_states", initial_states, x, shape)
        if final_states_out is not None:
            check_state("final_states_out", final_states_out, x, shape)
        if seq_idx is not None:
            if not isinstance(seq_idx, torch.Tensor) or seq_idx.dtype != torch.int32:
                raise invalid(op, "seq_idx", f"seq_idx must be an int32 tensor, got {getattr(seq_idx, 'dtype', type(seq_idx).__name__)}")
            if not seq_idx.is_cuda or seq_idx.get_device() != x.get_device():
                raise invalid(op, "seq_idx", f"seq_idx is on {seq_idx.device} but x is on {x.device}")
            if tuple(seq_idx.shape) != (n, length) or not seq_idx.is_contiguous():
                raise invalid(op, "seq_idx", f"seq_idx must be a contiguous [batch, length] = [{n}, {length}] tensor, "
                                             f"got {list(seq_idx.shape)}")
            if initial_states is not None:
                raise invalid(op, "seq_idx", "seq_idx cannot be combined with initial_states (packed sequences start "
                                             "from zeros, as in causal-conv1d)")
        return layout, shape

    def forward(x, weight, bias, cfg, initial_states, seq_idx, want_final, final_states_out):
        layout, shape = check(x, weight, bias, cfg, initial_states, seq_idx, final_states_out)
        weight = weight.contiguous()
        y = kt["_empty_layout"](list(x.shape), layout, x)
        final = final_states_out
        if final is None and want_final:
            final = torch.empty(shape, dtype=x.dtype, device=x.device)
        a = kt["_dw_args"](_capi.FORWARD, layout, x.shape, x.dtype, cfg)
        a.x, a.weight, a.y = x.data_ptr(), weight.data_ptr(), y.data_ptr()
        if bias is not None:
            a.bias = bias.contiguous().data_ptr()
        if initial_states is not None:
            a.initial_state = initial_states.data_ptr()
        if final is not None:
            a.final_state = final.data_ptr()
        if seq_idx is not None:
            a.seq_idx = seq_idx.data_ptr()
        kt["_run"](_capi.dwconv, a, x.get_device())
        return y, final

    def backward(ctx, dy):
        x, weight, bias, initial_states, seq_idx = ctx.saved_tensors
        cfg, layout = ctx.cfg, ctx.layout
        need = ctx.needs_input_grad  # x, weight, bias, initial_states, ...
        dy = kt["_to_layout"](dy, layout)
        act = cfg[12] != _capi.ACT_NONE
        dx = dw = db = dinit = None
        if need[0] or need[3]:
            dx = kt["_empty_layout"](list(x.shape), layout, x)
            a = kt["_dw_args"](_capi.BACKWARD_DATA, layout, x.shape, x.dtype, cfg)
            a.dy, a.weight, a.dx = dy.data_ptr(), weight.data_ptr(), dx.data_ptr()
            if act:
                a.x = x.data_ptr()
                if bias is not None:
                    a.bias = bias.data_ptr()
                if initial_states is not None:
                    a.initial_state = initial_states.data_ptr()
            if need[3]:
                dinit = torch.empty_like(initial_states)
                a.dinitial_state = dinit.data_ptr()
            if seq_idx is not None:
                a.seq_idx = seq_idx.data_ptr()
            kt["_run"](kt["_workspace_call"], a, x.get_device())
        if need[1] or (need[2] and bias is not None):
            c = x.shape[1]
            dw = torch.empty((c, cfg[0], cfg[1]), dtype=x.dtype, device=x.device)
            db = torch.empty((c,), dtype=x.dtype, device=x.device) if bias is not None else None
            a = kt["_dw_args"](_capi.BACKWARD_WEIGHT, layout, x.shape, x.dtype, cfg)
            a.x, a.dy, a.dweight = x.data_ptr(), dy.data_ptr(), dw.data_ptr()
            if db is not None:
                a.dbias = db.data_ptr()
            if act:
                a.weight = weight.data_ptr()
                if bias is not None:
                    a.bias = bias.data_ptr()
            if initial_states is not None:
                a.initial_state = initial_states.data_ptr()
            if seq_idx is not None:
                a.seq_idx = seq_idx.data_ptr()
            kt["_run"](kt["_workspace_call"], a, x.get_device())
            dw = dw.view(ctx.weight_shape)
        return (dx if need[0] else None, dw if need[1] else None, db if need[2] else None,
                dinit if need[3] else None, None, None, None, None)

    class StatesFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, initial_states, seq_idx, cfg, want_final, final_states_out):
            y, final = forward(x, weight, bias, cfg, initial_states, seq_idx, want_final, final_states_out)
            ctx.save_for_backward(x, weight.contiguous(), None if bias is None else bias.contiguous(),
                                  initial_states, seq_idx)
            ctx.cfg, ctx.layout, ctx.weight_shape = cfg, kt["_layout_of"](op, "x", x), weight.shape
            if final is None:
                return y
            if final_states_out is not None:
                ctx.mark_dirty(final_states_out)  # written in place
            ctx.mark_non_differentiable(final)
            return y, final

        @staticmethod
        def backward(ctx, dy, *unused_final_grad):
            return backward(ctx, dy)

    def causal_conv1d_states(x, weight, bias, cfg, initial_states, return_final_states, seq_idx, final_states_out):
        if kt["_traced"](x):
            raise invalid(op, "initial_states", "initial_states, return_final_states, final_states_out and seq_idx "
                                                "are not supported under torch.compile yet: call causal_conv1d eagerly")
        want_final = bool(return_final_states) or final_states_out is not None
        if kt["_needs_grad"](x, weight, bias, initial_states):
            out = StatesFunction.apply(x, weight, bias, initial_states, seq_idx, cfg, want_final, final_states_out)
        else:
            y, final = forward(x, weight, bias, cfg, initial_states, seq_idx, want_final, final_states_out)
            out = (y, final) if want_final else y
        if want_final and not return_final_states:
            return out[0]  # final_states_out alone: written in place
        return out

    return causal_conv1d_states
