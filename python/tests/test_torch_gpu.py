"""kvtune.torch and kvtune.nn on a GPU (torch >= 2.4 with CUDA; skipped elsewhere, saying why).

Every op and module is compared with torch.nn / torch.nn.functional evaluated in float64 on the same
inputs: forward and gradients (x, weight, bias). Then: the torch.library registrations (opcheck),
torch.compile(fullgraph=True) forward and backward, CUDA graph capture and replay (torch.cuda.graph
and mode="reduce-overhead"), the current stream and device, patch() on small models, error
reporting, and the host overhead of a cached call against F.layer_norm.
"""

import copy
import json
import os
import subprocess
import sys

import pytest

from conftest import gpu_reason

_REASON = gpu_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import kvtune  # noqa: E402
import kvtune.nn as knn  # noqa: E402
import kvtune.torch as kt  # noqa: E402

DTYPES = ["float32", "float16", "bfloat16"]
# Tolerances against a float64 reference: f32 statistics and accumulation in every dtype; the
# output's own rounding dominates for 16-bit types.
TOL = {"float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}
GRAD_TOL = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}


@pytest.fixture(autouse=True)
def context(kvtune_context):
    torch.manual_seed(0)
    return kvtune_context


def dt(name):
    return getattr(torch, name)


def close(actual, expected, tol, what=""):
    rtol, atol = tol
    scale = max(1.0, expected.abs().max().item())
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol * scale, msg=lambda m: f"{what}: {m}")


def rel(actual, expected, tol, what=""):
    """Relative L2 error of actual against a float64 reference."""
    err = ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()
    assert err < tol, f"{what}: relative error {err:.3g} (tolerance {tol:.3g})"


def leaf(t, dtype=None):
    t = t.detach().clone() if dtype is None else t.detach().to(dtype)
    return t.requires_grad_(True)


def compare(fn_ours, fn_ref, inputs, dtype, grads=True, seed_grad=None):
    """Runs fn_ours on `inputs` cast to dtype and fn_ref on float64 copies; compares outputs and
    the gradients of every input that is a tensor."""
    ours = [leaf(t, dt(dtype)) if isinstance(t, torch.Tensor) else t for t in inputs]
    # The reference sees the same (rounded) values, so only kvtune's arithmetic is compared.
    ref = [leaf(t, torch.float64) if isinstance(t, torch.Tensor) else t for t in ours]
    # Keep memory formats: .to(dtype) keeps them, as does clone.
    y = fn_ours(*ours)
    y_ref = fn_ref(*ref)
    assert y.shape == y_ref.shape
    close(y, y_ref, TOL[dtype], "forward")
    if not grads:
        return y
    g = torch.randn_like(y_ref) if seed_grad is None else seed_grad
    y.backward(g.to(y.dtype))
    y_ref.backward(g)
    for i, (a, b) in enumerate(zip(ours, ref)):
        if isinstance(a, torch.Tensor):
            assert a.grad is not None, f"input {i} has no gradient"
            close(a.grad, b.grad, GRAD_TOL[dtype], f"gradient of input {i}")
    return y


# ---- normalization ---------------------------------------------------------------------------

NORM_SHAPES = [(1, 1), (7, 3), (33, 37), (128, 41), (256, 128), (64, 1000), (3, 4096), (2, 5, 96)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", NORM_SHAPES)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm_matches_torch(shape, dtype, affine):
    cols = shape[-1]
    x = torch.randn(shape, device="cuda") * 3 + 1
    w = torch.randn(cols, device="cuda") if affine != "none" else None
    b = torch.randn(cols, device="cuda") if affine == "both" else None
    inputs = [x] + [t for t in (w, b) if t is not None]

    def ours(x, *wb):
        return kt.layer_norm(x, cols, *(list(wb) + [None] * (2 - len(wb))))

    def ref(x, *wb):
        return F.layer_norm(x, (cols,), *(list(wb) + [None] * (2 - len(wb))), eps=1e-5)

    compare(ours, ref, inputs, dtype)


def test_layer_norm_over_two_dimensions_and_large_mean():
    x = torch.randn(4, 6, 8, 16, device="cuda") * 0.01 + 1000.0  # |mean| >> std
    w = torch.randn(8, 16, device="cuda")
    b = torch.randn(8, 16, device="cuda")
    compare(lambda x, w, b: kt.layer_norm(x, (8, 16), w, b), lambda x, w, b: F.layer_norm(x, (8, 16), w, b), [x, w, b],
            "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", NORM_SHAPES)
@pytest.mark.parametrize("with_weight", [False, True])
def test_rms_norm_matches_torch(shape, dtype, with_weight):
    cols = shape[-1]
    x = torch.randn(shape, device="cuda")
    inputs = [x] + ([torch.randn(cols, device="cuda")] if with_weight else [])
    eps = 1e-6
    compare(lambda x, *w: kt.rms_norm(x, [cols], w[0] if w else None, eps),
            lambda x, *w: F.rms_norm(x, (cols,), w[0] if w else None, eps), inputs, dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 1 << 20), (3, (1 << 18) + 1)])
def test_wide_rows_split_across_blocks_match_torch(shape, dtype):
    """Rows one block cannot hold (issue 25): the forward's workspace comes from PyTorch's allocator."""
    cols = shape[-1]
    x = torch.randn(shape, device="cuda") * 3 + 1
    w = torch.randn(cols, device="cuda")
    b = torch.randn(cols, device="cuda")
    compare(lambda x, w, b: kt.layer_norm(x, cols, w, b), lambda x, w, b: F.layer_norm(x, (cols,), w, b, eps=1e-5),
            [x, w, b], dtype)
    compare(lambda x, w: kt.rms_norm(x, cols, w, 1e-6), lambda x, w: F.rms_norm(x, (cols,), w, 1e-6), [x, w], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "standardize"])
@pytest.mark.parametrize("shape", [(64, 768), (3, 7, 300), (5, 3), (2, 1 << 20)])
def test_residual_forms_match_the_add_then_norm_pair_with_gradients(op, shape, dtype):
    dt = getattr(torch, dtype)
    cols = shape[-1]
    x = (torch.randn(shape, device="cuda") * 2 + 0.5).to(dt)
    r = (torch.randn(shape, device="cuda") * 4).to(dt)
    w = (torch.randn(cols, device="cuda") * 0.5 + 1).to(dt)
    b = (torch.randn(cols, device="cuda") * 0.5).to(dt)
    dy, ds = torch.randn(shape, device="cuda").to(dt), torch.randn(shape, device="cuda").to(dt)
    xl, rl, wl, bl = (t.clone().requires_grad_() for t in (x, r, w, b))
    if op == "layer_norm":
        y, s = kt.add_layer_norm(xl, rl, cols, wl, bl)
    elif op == "rms_norm":
        y, s = kt.add_rms_norm(xl, rl, [cols], wl, 1e-5)
    else:
        y, s = kt.add_standardize(xl, rl, 1e-5, 1)
    assert torch.equal(s, x + r)  # the same rounding as a separate add
    torch.autograd.backward([y, s], [dy, ds])
    xd, rd, wd, bd = (t.double().requires_grad_() for t in (x, r, w, b))
    sd = (x + r).double().requires_grad_()
    if op == "layer_norm":
        yd = F.layer_norm(sd, (cols,), wd, bd, 1e-5)
        leaves = [sd, wd, bd]
    elif op == "rms_norm":
        yd = F.rms_norm(sd, (cols,), wd, 1e-5)
        leaves = [sd, wd]
    else:
        yd = (sd - sd.mean(-1, keepdim=True)) / (sd.std(-1, keepdim=True) + 1e-5)
        leaves = [sd]
    grads = torch.autograd.grad(yd, leaves, dy.double(), allow_unused=True)
    tol = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2}[dtype]
    rel(y, yd, tol, "y")
    rel(xl.grad, grads[0] + ds.double(), tol, "dx")
    assert torch.equal(xl.grad, rl.grad)
    if op != "standardize":
        rel(wl.grad, grads[1], tol, "dweight")
    if op == "layer_norm":
        rel(bl.grad, grads[2], tol, "dbias")


def test_residual_form_without_grad_and_with_s_unused():
    x = torch.randn(32, 256, device="cuda")
    r = torch.randn(32, 256, device="cuda")
    y, s = kt.add_layer_norm(x, r, 256)
    close(y, F.layer_norm(x + r, (256,)), (1e-5, 1e-5))
    xl = x.clone().requires_grad_()
    y, _ = kt.add_layer_norm(xl, r, 256)  # s unused: its gradient is None, dx has no ds term
    y.square().sum().backward()
    xr = x.clone().requires_grad_()
    F.layer_norm(xr + r, (256,)).square().sum().backward()
    close(xl.grad, xr.grad, (1e-4, 1e-4))
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.add_layer_norm(x, r[:, :128], 256)
    assert e.value.field == "residual"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.add_layer_norm(x, r.half(), 256)
    assert e.value.field == "residual"


def test_rms_norm_default_eps_is_torchs():
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    close(kt.rms_norm(x, 64), F.rms_norm(x.double(), (64,), eps=torch.finfo(torch.float16).eps), TOL["float16"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1024, 41), (1024, 128), (16384, 41), (97, 1), (5, 2), (3, 7, 300)])
@pytest.mark.parametrize("ddof", [0, 1])
def test_standardize_matches_the_packet_baseline(shape, dtype, ddof):
    if shape[-1] == 1 and ddof == 1:
        pytest.skip("std with ddof=1 of one element is undefined")
    x = torch.randn(shape, device="cuda") * 5 + 2
    eps = 1e-5

    def ref(x):
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, unbiased=bool(ddof)) + eps)

    compare(lambda x: kt.standardize(x, eps, ddof), ref, [x], dtype, grads=shape[-1] > 1)


def test_standardize_of_constant_rows_is_finite():
    x = torch.full((4, 32), 3.0, device="cuda", requires_grad=True)
    y = kt.standardize(x)
    assert torch.all(y == 0)
    y.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_normalize_takes_a_row_stride_and_refuses_others():
    base = torch.randn(64, 200, device="cuda")
    x = base[:, :128]  # rows 200 apart
    close(kt.layer_norm(x, 128), F.layer_norm(x.double(), (128,)), TOL["float32"])
    with pytest.raises(kvtune.InvalidArgumentError, match="call .contiguous"):
        kt.layer_norm(base.t(), 64)
    y = knn.LayerNorm(64).cuda()(base.t())  # the module copies instead
    close(y, F.layer_norm(base.t().double(), (64,)), TOL["float32"])


def test_inference_path_allocates_only_the_output():
    x = torch.randn(256, 128, device="cuda")
    kt.layer_norm(x, 128)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    with torch.no_grad():
        kt.layer_norm(x, 128)
    assert torch.cuda.memory_stats()["allocation.all.allocated"] - before == 1


# ---- depthwise convolution -------------------------------------------------------------------

CONV2D_CASES = [
    # (n, c, h, w, k, stride, padding, dilation)
    (2, 8, 16, 16, 3, 1, 1, 1),
    (2, 16, 15, 17, 3, 2, 1, 1),
    (1, 24, 28, 28, 5, 1, 2, 1),
    (2, 32, 14, 14, 7, 1, 3, 1),
    (1, 8, 20, 21, 3, 1, 2, 2),
    (1, 8, 31, 33, (3, 5), (1, 2), (0, 2), 1),
    (1, 16, 40, 40, 31, 1, 15, 1),
    (3, 5, 9, 9, 3, 1, "same", 1),
    (1, 4, 12, 12, 4, 1, "same", 1),
    (2, 6, 10, 10, 3, 1, "valid", 1),
]


def conv2d_ref(x, w, b, stride, padding, dilation):
    return F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=x.shape[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", CONV2D_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_dwconv2d_matches_torch(case, channels_last, dtype, bias):
    n, c, h, w, k, stride, padding, dilation = case
    kh, kw = (k, k) if isinstance(k, int) else k
    x = torch.randn(n, c, h, w, device="cuda")
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    weight = torch.randn(c, 1, kh, kw, device="cuda") / (kh * kw) ** 0.5
    inputs = [x, weight] + ([torch.randn(c, device="cuda")] if bias else [])

    def ours(x, w, *b):
        y = kt.dwconv2d(x, w, b[0] if b else None, stride, padding, dilation)
        assert y.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        return y

    compare(ours, lambda x, w, *b: conv2d_ref(x, w, b[0] if b else None, stride, padding, dilation), inputs, dtype)


def test_dwconv2d_asymmetric_padding():
    x = torch.randn(2, 8, 13, 11, device="cuda")
    w = torch.randn(8, 1, 3, 3, device="cuda")
    pads = [0, 2, 1, 0]  # top, bottom, left, right

    def ref(x, w):
        return F.conv2d(F.pad(x, (pads[2], pads[3], pads[0], pads[1])), w, groups=8)

    compare(lambda x, w: kt.dwconv2d(x, w, None, 1, pads), ref, [x, w], "float32")


CONV1D_CASES = [
    # (n, c, l, k, stride, padding, dilation)
    (2, 16, 64, 3, 1, 1, 1),
    (1, 32, 100, 4, 1, (3, 0), 1),
    (2, 8, 257, 7, 2, 3, 1),
    (1, 8, 128, 5, 1, 4, 2),
    (2, 64, 1024, 63, 1, 31, 1),  # kvtune's largest kernel
    (1, 4, 50, 3, 1, "same", 3),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", CONV1D_CASES)
def test_dwconv1d_matches_torch(case, channels_last, dtype):
    n, c, l, k, stride, padding, dilation = case
    x = torch.randn(n, c, l, device="cuda")
    if channels_last:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    w = torch.randn(c, 1, k, device="cuda") / k ** 0.5
    b = torch.randn(c, device="cuda")

    def ref(x, w, b):
        if isinstance(padding, tuple):
            return F.conv1d(F.pad(x, padding), w, b, stride=stride, dilation=dilation, groups=c)
        return F.conv1d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=c)

    def ours(x, w, b):
        y = kt.dwconv1d(x, w, b, stride, padding, dilation)
        assert y.stride()[1] == (1 if channels_last else y.shape[2])
        return y

    compare(ours, ref, [x, w, b], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k,dilation", [(2, 1), (3, 1), (4, 1), (4, 2), (8, 1), (16, 1), (33, 1), (63, 1)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_causal_conv1d_matches_torch(k, dilation, channels_last, dtype):
    n, c, l = 2, 48, 300
    x = torch.randn(n, c, l, device="cuda")
    if channels_last:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    w = torch.randn(c, 1, k, device="cuda") / k ** 0.5
    b = torch.randn(c, device="cuda")

    def ref(x, w, b):
        return F.conv1d(x, w, b, padding=(k - 1) * dilation, dilation=dilation, groups=c)[..., :l]

    compare(lambda x, w, b: kt.causal_conv1d(x, w, b, dilation), ref, [x, w, b], dtype)


ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("channels_last", [False, True])
def test_causal_conv1d_with_an_activation_matches_torch(activation, channels_last, dtype):
    # Mamba's causal_conv1d(x, w, b, activation="silu"), gradients included (recomputed z, no saved tensor).
    n, c, l, k = 2, 40, 123, 4
    x = torch.randn(n, c, l, device="cuda")
    if channels_last:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    w = torch.randn(c, 1, k, device="cuda") / k ** 0.5
    b = torch.randn(c, device="cuda")
    act = ACTIVATIONS[activation]

    def ref(x, w, b):
        return act(F.conv1d(x, w, b, padding=k - 1, groups=c)[..., :l])

    compare(lambda x, w, b: kt.causal_conv1d(x, w, b, activation=activation), ref, [x, w, b], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_dwconv2d_with_an_activation_matches_torch(activation, dtype):
    x = torch.randn(2, 24, 15, 13, device="cuda").contiguous(memory_format=torch.channels_last)
    w = torch.randn(24, 1, 5, 5, device="cuda") / 5
    b = torch.randn(24, device="cuda")
    act = ACTIVATIONS[activation]
    compare(lambda x, w, b: kt.dwconv2d(x, w, b, 2, 2, activation=activation),
            lambda x, w, b: act(F.conv2d(x, w, b, 2, 2, groups=24)), [x, w, b], dtype)


def test_causal_conv1d_takes_a_2d_weight():
    x = torch.randn(1, 8, 40, device="cuda")
    w = torch.randn(8, 4, device="cuda")
    close(kt.causal_conv1d(x, w), F.conv1d(x.double(), w.double().unsqueeze(1), padding=3, groups=8)[..., :40],
          TOL["float32"])


def test_backward_weight_nondeterministic_variants_agree():
    x = leaf(torch.randn(4, 32, 56, 56, device="cuda"))
    w = leaf(torch.randn(32, 1, 3, 3, device="cuda"))
    kt.dwconv2d(x, w, None, 1, 1, deterministic=False).sum().backward()
    x2, w2 = leaf(x.double()), leaf(w.double())
    conv2d_ref(x2, w2, None, 1, 1, 1).sum().backward()
    close(w.grad, w2.grad, GRAD_TOL["float32"])


def test_gradients_with_noncontiguous_upstream():
    x = leaf(torch.randn(2, 8, 16, 16, device="cuda").contiguous(memory_format=torch.channels_last))
    w = leaf(torch.randn(8, 1, 3, 3, device="cuda"))
    y = kt.dwconv2d(x, w, None, 1, 1)
    g = torch.randn(2, 16, 16, 8, device="cuda").permute(0, 3, 1, 2)[:, :, :, :]  # NHWC-strided
    (y * g.contiguous()).sum().backward()
    x2, w2 = leaf(x.double()), leaf(w.double())
    (conv2d_ref(x2, w2, None, 1, 1, 1) * g.double()).sum().backward()
    close(x.grad, x2.grad, GRAD_TOL["float32"])
    close(w.grad, w2.grad, GRAD_TOL["float32"])


# ---- the registered ops ----------------------------------------------------------------------

def op_samples():
    x4 = torch.randn(2, 8, 12, 12, device="cuda", requires_grad=True)
    x4cl = torch.randn(2, 8, 12, 12, device="cuda").contiguous(memory_format=torch.channels_last).requires_grad_()
    x3 = torch.randn(2, 8, 40, device="cuda", requires_grad=True)
    w2 = torch.randn(8, 1, 3, 3, device="cuda", requires_grad=True)
    w1 = torch.randn(8, 1, 4, device="cuda", requires_grad=True)
    b = torch.randn(8, device="cuda", requires_grad=True)
    xn = torch.randn(16, 64, device="cuda", requires_grad=True)
    g = torch.randn(64, device="cuda", requires_grad=True)
    return [
        (torch.ops.kvtune.layer_norm, (xn, [64], g, g.detach().clone().requires_grad_(), 1e-5)),
        (torch.ops.kvtune.layer_norm, (xn, [64], None, None, 1e-5)),
        (torch.ops.kvtune.rms_norm, (xn, [64], g, 1e-6)),
        (torch.ops.kvtune.standardize, (xn, 1e-5, 1)),
        (torch.ops.kvtune.add_norm, (xn, xn.detach().clone().requires_grad_(), 1, [64], g, None, 1e-5, 0)),
        (torch.ops.kvtune.dwconv2d, (x4, w2, b, [1, 1], [1, 1, 1, 1], [1, 1], True, 0)),
        (torch.ops.kvtune.dwconv2d, (x4cl, w2, None, [2, 2], [1, 1, 1, 1], [1, 1], True, 0)),
        (torch.ops.kvtune.dwconv1d, (x3, w1, b, 1, [2, 1], 1, True, 0)),
        (torch.ops.kvtune.causal_conv1d, (x3, w1, b, 1, True, 0)),
        (torch.ops.kvtune.causal_conv1d, (x3, w1, b, 1, True, 1)),  # silu
        (torch.ops.kvtune.dwconv2d, (x4cl, w2, b, [1, 1], [1, 1, 1, 1], [1, 1], True, 3)),  # gelu (erf)
    ]


@pytest.mark.parametrize("index", range(11))
def test_opcheck(index):
    op, args = op_samples()[index]
    torch.library.opcheck(op, args)


def test_ops_through_the_dispatcher_match_the_eager_path():
    x = leaf(torch.randn(4, 16, 20, 20, device="cuda"))
    w = leaf(torch.randn(16, 1, 5, 5, device="cuda"))
    y = torch.ops.kvtune.dwconv2d(x, w, None, [1, 1], [2, 2, 2, 2], [1, 1], True, 0)
    y.square().sum().backward()
    x2, w2 = leaf(x), leaf(w)
    kt.dwconv2d(x2, w2, None, 1, 2).square().sum().backward()
    assert torch.equal(x.grad, x2.grad) and torch.equal(w.grad, w2.grad)


# ---- torch.compile ---------------------------------------------------------------------------

class Mixed(torch.nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.dw = knn.DepthwiseConv2d(c, c, 7, padding=3, groups=c)
        self.ln = knn.LayerNorm(c)
        self.conv1 = knn.CausalConv1d(c, 4)
        self.rms = knn.RMSNorm(c)
        self.proj = torch.nn.Linear(c, c)

    def forward(self, x):  # x [N, C, H, W]
        y = self.dw(x)
        y = self.ln(y.permute(0, 2, 3, 1))  # NHWC view: LayerNorm over C
        s = y.flatten(1, 2).transpose(1, 2)  # [N, C, H*W] channels-last 1D
        s = F.silu(self.conv1(s))
        s = self.rms(s.transpose(1, 2))
        y, t = kt.add_rms_norm(self.proj(s), s, [s.shape[-1]], None, 1e-6)
        return y + t + kt.standardize(s)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compile_fullgraph_matches_eager(mode):
    torch._dynamo.reset()
    model = Mixed().cuda()
    x = torch.randn(2, 16, 8, 8, device="cuda")
    eager = model(x.clone().requires_grad_())
    eager.square().mean().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True, mode=mode)
    for _ in range(3):  # reduce-overhead records its graph after warm-up runs
        model.zero_grad()
        xc = x.clone().requires_grad_()
        out = compiled(xc)
        out.square().mean().backward()
    close(out, eager.detach(), (1e-5, 1e-5), "compiled forward")
    for p, g in zip(model.parameters(), grads):
        close(p.grad, g, (1e-4, 1e-4), "compiled gradient")


def test_compile_copies_an_untakeable_layout_once_and_matches_torch():
    # Mamba's pattern: the conv input is a transposed half of in_proj's output (channel stride 1,
    # position stride 2C), a layout kvtune copies. Under torch.compile the copy is made in the graph
    # before the op, which saves it for the weight gradient.
    torch._dynamo.reset()
    conv = knn.CausalConv1d(16, 4, activation="silu").cuda()
    ref = torch.nn.Conv1d(16, 16, 4, padding=3, groups=16).cuda()
    ref.load_state_dict(conv.state_dict())

    def f(x):
        u, z = x.chunk(2, dim=-1)
        return conv(u.transpose(1, 2)) * z.transpose(1, 2)

    x = torch.randn(2, 50, 32, device="cuda", requires_grad=True)
    y = torch.compile(f, fullgraph=True)(x)
    y.square().sum().backward()
    xr = x.detach().clone().requires_grad_()
    u, z = xr.chunk(2, dim=-1)
    yr = F.silu(ref(u.transpose(1, 2))[..., :50]) * z.transpose(1, 2)
    yr.square().sum().backward()
    close(y, yr.detach(), (1e-5, 1e-5), "forward")
    close(x.grad, xr.grad, (1e-4, 1e-4), "input gradient")
    close(conv.weight.grad, ref.weight.grad, (1e-4, 1e-4), "weight gradient")
    close(conv.bias.grad, ref.bias.grad, (1e-4, 1e-4), "bias gradient")


def test_compile_dynamic_shapes():
    torch._dynamo.reset()

    def f(x, w):
        return kt.layer_norm(x, x.shape[-1:], w) + kt.standardize(x)

    fc = torch.compile(f, fullgraph=True, dynamic=True)
    w = torch.randn(96, device="cuda")
    for rows in (5, 17, 300):
        x = torch.randn(rows, 96, device="cuda")
        close(fc(x, w), f(x, w), (1e-5, 1e-5))


def test_compile_reports_no_graph_break():
    torch._dynamo.reset()
    model = Mixed().cuda()
    explanation = torch._dynamo.explain(model)(torch.randn(2, 16, 8, 8, device="cuda"))
    assert explanation.graph_break_count == 0, explanation.break_reasons


# ---- CUDA graphs, streams, devices ------------------------------------------------------------

def test_cuda_graph_capture_and_replay_forward_and_backward():
    model = torch.nn.Sequential(knn.DepthwiseConv2d(8, 8, 3, padding=1, groups=8), torch.nn.Flatten(2),
                                knn.LayerNorm(64)).cuda()
    static_x = torch.randn(4, 8, 8, 8, device="cuda", requires_grad=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up: loads every variant (kvtune never compiles during capture)
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            model(static_x).square().sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    model.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = model(static_x)
        static_y.square().sum().backward()
    for _ in range(3):
        new_x = torch.randn_like(static_x)
        static_x.data.copy_(new_x)
        graph.replay()
        torch.cuda.synchronize()
        ref_x = new_x.clone().requires_grad_()
        ref_model = copy.deepcopy(model)
        ref_model.zero_grad(set_to_none=True)
        ref_y = ref_model(ref_x)
        ref_y.square().sum().backward()
        close(static_y, ref_y.detach(), (1e-5, 1e-5), "replayed forward")
        close(model[0].weight.grad, ref_model[0].weight.grad, (1e-4, 1e-4), "replayed weight gradient")


def test_capture_of_an_unloaded_problem_fails_clearly():
    code = r"""
import sys; sys.path.insert(0, %r)
import torch, kvtune, kvtune.torch as kt
kvtune.set_context(kvtune.Context(policy="heuristic", cache_path=""))
kt.layer_norm(torch.randn(4, 64, device="cuda"), 64)  # the device is set up; this shape is loaded
x = torch.randn(37, 333, device="cuda")
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        kt.layer_norm(x, 333)
except kvtune.CaptureError as e:
    print("CaptureError", e.status_name, str(e))
except Exception as e:
    print("other", type(e).__name__, e)
""" % os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "CaptureError KVT_ERROR_CAPTURE" in r.stdout, r.stdout + r.stderr
    assert "run it once before capture" in r.stdout


def test_runs_on_the_current_stream():
    x = torch.randn(4096, 1024, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # keeps s busy: a launch elsewhere would read x too early
        x.add_(1.0)
        y = kt.layer_norm(x, 1024)
    s.synchronize()
    close(y, F.layer_norm(x.double(), (1024,)), TOL["float32"])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_runs_on_the_tensors_device():
    x = torch.randn(64, 128, device="cuda:1")
    w = torch.randn(8, 1, 3, 3, device="cuda:1")
    with torch.cuda.device(0):
        y = kt.layer_norm(x, 128)
        z = kt.dwconv2d(torch.randn(1, 8, 10, 10, device="cuda:1"), w, None, 1, 1)
    assert y.device == x.device and z.device == x.device
    close(y, F.layer_norm(x.double(), (128,)), TOL["float32"])


# ---- errors ----------------------------------------------------------------------------------

def test_mixed_devices_and_dtypes_are_refused():
    x = torch.randn(4, 8, device="cuda")
    with pytest.raises(kvtune.InvalidArgumentError, match="weight is on cpu") as e:
        kt.layer_norm(x, 8, torch.ones(8))
    assert e.value.field == "weight"
    with pytest.raises(kvtune.InvalidArgumentError, match="weight has dtype torch.float16 but x has torch.float32"):
        kt.layer_norm(x, 8, torch.ones(8, device="cuda", dtype=torch.float16))
    with pytest.raises(kvtune.InvalidArgumentError, match="float64"):
        kt.dwconv2d(torch.randn(1, 2, 5, 5, device="cuda", dtype=torch.float64),
                    torch.randn(2, 1, 3, 3, device="cuda", dtype=torch.float64))


def test_library_errors_arrive_with_their_field():
    x = torch.randn(1, 4, 200, device="cuda")
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.dwconv1d(x, torch.randn(4, 1, 64, device="cuda"), padding=32)  # kernel_w 64 > kvtune's 63
    assert e.value.field == "kernel_w" and "[field kernel_w]" in str(e.value)
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.dwconv2d(torch.randn(1, 4, 2, 2, device="cuda"), torch.randn(4, 1, 5, 5, device="cuda"))
    assert e.value.field == "weight"


# ---- modules and patch -----------------------------------------------------------------------

def module_pairs():
    rms = torch.nn.RMSNorm(32, eps=1e-6)
    return [
        (torch.nn.LayerNorm(32), knn.LayerNorm(32), (6, 10, 32)),
        (torch.nn.LayerNorm(32, elementwise_affine=False), knn.LayerNorm(32, elementwise_affine=False), (6, 32)),
        (rms, knn.RMSNorm(32, eps=1e-6), (6, 10, 32)),
        (torch.nn.Conv1d(32, 32, 5, padding=2, groups=32), knn.DepthwiseConv1d(32, 32, 5, padding=2, groups=32),
         (3, 32, 50)),
        (torch.nn.Conv2d(32, 32, 7, padding=3, groups=32), knn.DepthwiseConv2d(32, 32, 7, padding=3, groups=32),
         (2, 32, 14, 14)),
        (torch.nn.Conv2d(32, 32, 3, stride=2, padding="valid", groups=32, bias=False),
         knn.DepthwiseConv2d(32, 32, 3, stride=2, padding="valid", groups=32, bias=False), (2, 32, 15, 15)),
    ]


@pytest.mark.parametrize("index", range(6))
def test_modules_match_torch_nn_with_its_state_dict(index):
    ref, ours, shape = module_pairs()[index]
    for p in ref.parameters():  # not the default init: ones/zeros would hide mistakes
        torch.nn.init.normal_(p)
    ours.load_state_dict(ref.state_dict())
    ref, ours = ref.cuda().double(), ours.cuda()
    x = torch.randn(shape, device="cuda")
    xa, xb = leaf(x), leaf(x.double())
    ya, yb = ours(xa), ref(xb)
    close(ya, yb, TOL["float32"])
    g = torch.randn_like(yb)
    ya.backward(g.float())
    yb.backward(g)
    close(xa.grad, xb.grad, GRAD_TOL["float32"])
    for (name, pa), (_, pb) in zip(ours.named_parameters(), ref.named_parameters()):
        close(pa.grad, pb.grad, GRAD_TOL["float32"], name)


def test_causal_module_matches_padded_conv1d():
    ref = torch.nn.Conv1d(16, 16, 4, padding=3, groups=16).cuda()
    ours = knn.CausalConv1d(16, 4).cuda()
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 16, 64, device="cuda")
    close(ours(x), ref.double()(x.double())[..., :64], TOL["float32"])


class ConvNeXtBlock(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dwconv = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = torch.nn.LayerNorm(c, eps=1e-6)
        self.pw1 = torch.nn.Linear(c, 4 * c)
        self.pw2 = torch.nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class MambaLikeBlock(torch.nn.Module):
    def __init__(self, d, k=4):
        super().__init__()
        self.norm = torch.nn.RMSNorm(d)
        self.inp = torch.nn.Linear(d, 2 * d)
        self.conv = torch.nn.Conv1d(d, d, k, padding=k - 1, groups=d)
        self.out = torch.nn.Linear(d, d)

    def forward(self, x):  # [B, L, D]
        u, gate = self.inp(self.norm(x)).chunk(2, dim=-1)
        u = self.conv(u.transpose(1, 2))[..., :x.shape[1]].transpose(1, 2)
        return x + self.out(F.silu(u) * F.silu(gate))


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.Sequential(ConvNeXtBlock(32), ConvNeXtBlock(32)), (2, 32, 14, 14)),
    (lambda: torch.nn.Sequential(MambaLikeBlock(64), MambaLikeBlock(64)), (2, 128, 64)),
])
def test_patch_keeps_the_model_and_its_gradients(make, shape):
    ref = make().cuda()
    model = copy.deepcopy(ref)
    report = knn.patch(model)
    assert len(report.swapped) == 4 and not report.left, str(report)
    x = torch.randn(shape, device="cuda")
    ya, yb = model(x), ref(x)
    close(ya, yb, (1e-4, 1e-4))
    ya.square().mean().backward()
    yb.square().mean().backward()
    for (name, pa), (_, pb) in zip(model.named_parameters(), ref.named_parameters()):
        close(pa.grad, pb.grad, (2e-4, 2e-4), name)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # the swapped modules hold the optimizer's parameters
    before = model[0].norm.weight.detach().clone() if hasattr(model[0].norm, "weight") else None
    opt.step()
    if before is not None:
        assert not torch.equal(before, model[0].norm.weight.detach())


def test_counters_show_cached_calls():
    x = torch.randn(128, 256, device="cuda")
    kt.layer_norm(x, 256)
    c0 = kvtune.counters()
    for _ in range(10):
        kt.layer_norm(x, 256)
    c1 = kvtune.counters()
    assert c1["table_hits"] - c0["table_hits"] == 10
    assert c1["compiles"] == c0["compiles"]


# ---- host overhead -----------------------------------------------------------------------------

def gpu_time_us(fn, calls=200):
    """Per-call device time by CUDA-graph replay (no host work)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


# The host-time measurement, run in a fresh process: interleaved rounds of 2,000 calls each, the best
# round of each side (a clock or allocator hiccup in one round does not decide the comparison).
_HOST_OVERHEAD_CHILD = r"""
import json, os, sys, time; sys.path.insert(0, %r)
import torch, torch.nn.functional as F, kvtune, kvtune.torch as kt
kvtune.set_context(kvtune.Context(policy=os.environ.get("KVTUNE_POLICY") or "heuristic",
                                  cache_path=os.environ.get("KVTUNE_CACHE", "")))

def host_time_us(fn, calls=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6

x = torch.randn(64, 128, device="cuda")
w = torch.randn(128, device="cuda")
b = torch.randn(128, device="cuda")
with torch.no_grad():
    ours = lambda: kt.layer_norm(x, 128, w, b)
    theirs = lambda: F.layer_norm(x, (128,), w, b)
    ours()
    kvtune_us = torch_us = float("inf")
    for _ in range(7):
        kvtune_us = min(kvtune_us, host_time_us(ours))
        torch_us = min(torch_us, host_time_us(theirs))
print(json.dumps({"kvtune": kvtune_us, "torch": torch_us}))
""" % os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_host_overhead_of_a_cached_call():
    """A cached kvtune call from Python costs at most 3 us of host time more than F.layer_norm's
    (KVTUNE_OVERHEAD_US overrides the bound); the times are printed for the record.

    Measured in fresh processes, up to three, the best difference counting: the GPU machines run
    some processes about 1.5x slower throughout (F.layer_norm itself 15.5 us a call instead of 10;
    bench/NOTES.md, 2026-11-28), which scales the difference too. Each process measures both sides
    in turn, so a slow process is slow for both."""
    bound = float(os.environ.get("KVTUNE_OVERHEAD_US", "3"))
    runs = []
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", _HOST_OVERHEAD_CHILD], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        times = json.loads(r.stdout.strip().splitlines()[-1])
        runs.append((times["kvtune"], times["torch"]))
        if times["kvtune"] - times["torch"] <= bound:
            break
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, device="cuda")
    b = torch.randn(128, device="cuda")
    with torch.no_grad():
        kernel_ours = gpu_time_us(lambda: kt.layer_norm(x, 128, w, b))
    print("\nhost per call (fresh processes): " +
          "; ".join(f"kvtune {k:.2f} us, F.layer_norm {t:.2f} us ({k - t:+.2f})" for k, t in runs) +
          f"; kvtune kernel {kernel_ours:.2f} us (graph replay)")
    assert min(k - t for k, t in runs) <= bound, runs
