"""kvtune.torch.causal_conv1d's states and packed sequences (initial_states, return_final_states,
final_states_out, seq_idx): argument errors everywhere; on CUDA every dtype x layout x option against
a float64 F.conv1d reference, forward and autograd (x, weight, bias, initial_states), and prefill's
final states continuing in causal_conv1d_update."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

import kvtune  # noqa: E402
import kvtune.torch as kt  # noqa: E402

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_cpu_tensors_are_refused_with_states():
    x, w = torch.randn(1, 3, 8), torch.randn(3, 1, 4)
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only"):
        kt.causal_conv1d(x, w, initial_states=torch.randn(1, 3, 3))
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only"):
        kt.causal_conv1d(x, w, return_final_states=True)


def reference(x, weight, bias, initial_states, seq_idx, activation):
    """float64 F.conv1d of [initial_states, x] (or of each packed sequence alone), and the final states."""
    import torch.nn.functional as F
    x, weight = x.double(), weight.double().view(x.shape[1], 1, -1)
    bias = None if bias is None else bias.double()
    k = weight.shape[-1]
    s = k - 1
    n, c, length = x.shape
    if seq_idx is None:
        init = torch.zeros(n, c, s, dtype=x.dtype, device=x.device) if initial_states is None else initial_states.double()
        u = torch.cat([init, x], dim=2)
        y = F.conv1d(u, weight, bias, groups=c)
        final = u[:, :, -s:]
    else:
        y = torch.empty_like(x)
        final = torch.zeros(n, c, s, dtype=x.dtype, device=x.device)
        for b in range(n):
            ids = seq_idx[b].tolist()
            start = 0
            while start < length:
                end = start
                while end < length and ids[end] == ids[start]:
                    end += 1
                part = F.pad(x[b:b + 1, :, start:end], (s, 0))
                y[b:b + 1, :, start:end] = F.conv1d(part, weight, bias, groups=c)
                if end == length:
                    tail = part[0, :, -s:]
                    final[b] = tail
                start = end
    if activation == "silu":
        y = F.silu(y)
    return y, final


def packed(n, length, device):
    ids = torch.zeros(n, length, dtype=torch.int32)
    for b in range(n):
        cuts = sorted({3 + b, 4 + b, 11, length - 2})
        for cut in cuts:
            ids[b, cut:] += 1
    return ids.to(device)


def tolerance(dtype):
    return {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("option", ["initial_states", "seq_idx"])
def test_forward_and_gradients_match_float64(dtype, channels_last, option):
    torch.manual_seed(0)
    n, c, length, k = 2, 24, 37, 4
    x = torch.randn(n, length, c, device="cuda").to(dtype).transpose(1, 2) if channels_last else \
        torch.randn(n, c, length, device="cuda").to(dtype)
    w = torch.randn(c, 1, k, device="cuda").to(dtype)
    b = torch.randn(c, device="cuda").to(dtype)
    init = torch.randn(n, c, k - 1, device="cuda").to(dtype) if option == "initial_states" else None
    seq = packed(n, length, "cuda") if option == "seq_idx" else None
    leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)] + \
             ([init.detach().clone().requires_grad_()] if init is not None else [])
    y, final = kt.causal_conv1d(leaves[0], leaves[1], leaves[2], activation="silu",
                                initial_states=leaves[3] if init is not None else None, return_final_states=True,
                                seq_idx=seq)
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    ref_y, ref_final = reference(ref_leaves[0], ref_leaves[1], ref_leaves[2],
                                 ref_leaves[3] if init is not None else None, seq, "silu")
    assert y.shape == x.shape and y.stride() == x.stride()
    assert torch.allclose(y.double(), ref_y, atol=tolerance(dtype) * 4, rtol=tolerance(dtype))
    assert torch.equal(final.double(), ref_final.detach())  # copies of inputs
    dy = torch.randn_like(ref_y)
    y.backward(dy.to(dtype))
    ref_y.backward(dy)
    for got, want, name in zip(leaves, ref_leaves, ["x", "weight", "bias", "initial_states"]):
        scale = want.grad.abs().max().item() + 1e-6
        err = (got.grad.double() - want.grad).abs().max().item() / scale
        assert err < 8 * tolerance(dtype), f"d{name}: {err}"


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prefill_hands_its_state_to_the_decode_step(dtype):
    torch.manual_seed(1)
    n, c, prompt, steps, k = 3, 40, 19, 5, 4
    whole = torch.randn(n, c, prompt + steps, device="cuda").to(dtype)
    w = torch.randn(c, k, device="cuda").to(dtype)
    b = torch.randn(c, device="cuda").to(dtype)
    conv_state = torch.full((n, c, k - 1), float("nan"), device="cuda", dtype=dtype)
    y = kt.causal_conv1d(whole[:, :, :prompt].contiguous(), w, b, activation="silu", final_states_out=conv_state)
    outs = [y]
    for t in range(prompt, prompt + steps):  # the decode step continues in the prefill's state, in place
        outs.append(kt.causal_conv1d_update(whole[:, :, t].contiguous(), conv_state, w, b, activation="silu")[:, :, None])
    got = torch.cat(outs, dim=2)
    want, _ = reference(whole, w, b, None, None, "silu")
    assert torch.allclose(got.double(), want, atol=tolerance(dtype) * 4, rtol=tolerance(dtype))


@cuda
def test_state_and_seq_idx_errors_name_the_field():
    x = torch.randn(2, 8, 16, device="cuda")
    w = torch.randn(8, 1, 4, device="cuda")
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.causal_conv1d(x, w, initial_states=torch.randn(2, 8, 2, device="cuda"))
    assert e.value.field == "initial_states"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.causal_conv1d(x, w, seq_idx=torch.zeros(2, 16, dtype=torch.int64, device="cuda"))
    assert e.value.field == "seq_idx"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.causal_conv1d(x, w, initial_states=torch.randn(2, 8, 3, device="cuda"),
                         seq_idx=torch.zeros(2, 16, dtype=torch.int32, device="cuda"))
    assert e.value.field == "seq_idx"
