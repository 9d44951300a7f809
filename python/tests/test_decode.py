"""kvtune.torch.causal_conv1d_update (the dwconv_decode family through the C ABI): the args struct and
argument errors everywhere; on a CUDA device, every dtype x state form x state indices x activation
against a float64 PyTorch reference (F.conv1d over the row's history), over a chain of steps, with
padding and broken rows, with overlap_prologue, and under CUDA graph capture."""

import ctypes

import pytest

import kvtune
from kvtune import _capi

torch = pytest.importorskip("torch", reason="torch is not installed")
import torch.nn.functional as F  # noqa: E402

import kvtune.torch as kt  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason=f"needs a CUDA device (torch {torch.__version__} sees none)")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
ACTS = {None: lambda z: z, "silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
        "relu": F.relu}


@pytest.fixture(autouse=True)
def context(kvtune_context):
    """An in-memory cache and the heuristic policy (conftest), unless KVTUNE_POLICY says otherwise."""
    yield kvtune_context


def test_decode_args_struct_matches_the_c_layout():
    assert ctypes.sizeof(_capi.DwConvDecodeArgs) == 120
    a = _capi.dwconv_decode_args()
    assert a.struct_size == 120 and a.overlap_prologue == 0 and a.seqlen == 1 and a.kernel_w == 4 and a.state_len == 0 and a.state_slots == 0
    assert a.activation == _capi.ACT_NONE and not a.cache_seqlens and not a.state_indices


def test_decode_errors_name_the_field_before_any_gpu_work():
    with kvtune.Context(policy="heuristic", cache_path="") as context:
        a = _capi.dwconv_decode_args()
        a.dtype, a.batch, a.channels = _capi.BF16, 8, 64
        a.x, a.weight, a.y, a.state = 0x100000, 0x200000, 0x300000, 0x400000
        a.state_len = 7  # without cache_seqlens: exactly kernel_w - 1
        with pytest.raises(kvtune.InvalidArgumentError, match="exactly kernel_w - 1") as e:
            _capi.dwconv_decode(a, context=context)
        assert e.value.field == "state_len"
        a.state_len, a.seqlen = 0, 65
        with pytest.raises(kvtune.InvalidArgumentError) as e:
            _capi.dwconv_decode(a, context=context)
        assert e.value.field == "seqlen"


def test_cpu_tensors_and_bad_shapes_are_refused():
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only") as e:
        kt.causal_conv1d_update(torch.randn(2, 8), torch.randn(2, 8, 3), torch.randn(8, 4))
    assert e.value.field == "x"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt.causal_conv1d_update(torch.randn(2, 8), torch.randn(2, 8, 3), torch.randn(8, 4), activation="tanh")
    assert e.value.field in ("x", "activation")


def reference(x, state, weight, bias, act, positions=None, indices=None):
    """float64: (y, new state) of one step, as kvtune::DwConvDecodeArgs defines it."""
    x3 = x.double() if x.dim() == 3 else x.double().unsqueeze(-1)
    batch, channels, seqlen = x3.shape
    k = weight.shape[-1]
    w = weight.double().reshape(channels, 1, k)
    state = state.double().clone()
    y = torch.full_like(x3, float("nan"))
    slots, length = state.shape[0], state.shape[2]
    for b in range(batch):
        slot = int(indices[b]) if indices is not None else b
        if slot < 0:
            continue
        pos = int(positions[b]) if positions is not None else 0
        if slot >= slots or pos < 0:
            continue  # NaN
        if positions is None:
            history = state[slot]
        else:
            q = torch.arange(pos - (k - 1), pos, device=state.device)
            history = torch.where(q.unsqueeze(0) >= 0, state[slot][:, q.clamp(min=0) % length],
                                  torch.zeros((), dtype=torch.float64, device=state.device))
        u = torch.cat([history, x3[b]], dim=1)
        z = F.conv1d(u.unsqueeze(0), w, bias.double() if bias is not None else None, groups=channels)[0]
        y[b] = ACTS[act](z)
        if positions is None:
            state[slot] = u[:, seqlen:]
        else:
            for t in range(seqlen):
                state[slot][:, (pos + t) % length] = x3[b][:, t]
    return (y if x.dim() == 3 else y.squeeze(-1)), state


def close(out, ref, dtype):
    mask = ~torch.isnan(ref)
    assert torch.equal(torch.isnan(out.double()), ~mask)
    err = (out.double()[mask] - ref[mask]).norm() / ref[mask].norm().clamp(min=1e-30)
    assert err <= TOL[dtype], f"relative error {err:.3g}"


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("circular", [False, True])
@pytest.mark.parametrize("with_indices", [False, True])
def test_steps_match_the_float64_reference(dtype, circular, with_indices):
    torch.manual_seed(0)
    dev = "cuda"
    batch, channels, k = 6, 40, 4
    seqlen = 2 if circular else 1
    act = ["silu", None, "gelu", "relu", "gelu_tanh"][(int(circular) + 2 * int(with_indices) + DTYPES.index(dtype)) % 5]
    slots = batch + 2 if with_indices else batch
    length = 9 if circular else k - 1
    state = torch.randn(slots, channels, length, device=dev).to(dtype)
    weight = torch.randn(channels, 1, k, device=dev).to(dtype)
    bias = torch.randn(channels, device=dev).to(dtype)
    positions = torch.tensor([0, 3, 8, 11, -1, 5], dtype=torch.int32, device=dev) if circular else None
    indices = torch.tensor([7, -1, 2, 8, 0, 1], dtype=torch.int32, device=dev) if with_indices else None
    for step in range(3):
        x = torch.randn(batch, channels, seqlen, device=dev).to(dtype)
        if seqlen == 1:
            x = x[..., 0].contiguous()
        ref_y, ref_state = reference(x, state, weight, bias, act, positions, indices)
        # The last step reads weight, bias and the indices early: the kernel before it (torch.randn of
        # x) writes none of them.
        y = kt.causal_conv1d_update(x, state, weight, bias, activation=act, cache_seqlens=positions,
                                    conv_state_indices=indices, overlap_prologue=step == 2)
        torch.cuda.synchronize()
        # Padding rows are not written: compare only rows the reference wrote or marked broken.
        rows = [b for b in range(batch) if indices is None or int(indices[b]) >= 0]
        close(y[rows], ref_y[rows], dtype)
        assert torch.equal(state.double(), ref_state), "the state is a copy of inputs: exact"
        if positions is not None:
            positions = torch.where(positions >= 0, positions + seqlen, positions)


@needs_cuda
def test_graph_capture_replays_the_step():
    dev = "cuda"
    x = torch.randn(4, 64, device=dev, dtype=torch.bfloat16)
    state = torch.randn(4, 64, 3, device=dev, dtype=torch.bfloat16)
    weight = torch.randn(64, 4, device=dev, dtype=torch.bfloat16)
    kt.causal_conv1d_update(x, state.clone(), weight, activation="silu")  # loads the variant
    start = state.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = kt.causal_conv1d_update(x, state, weight, activation="silu")
    state.copy_(start)
    graph.replay()
    torch.cuda.synchronize()
    ref_y, ref_state = reference(x, start, weight, None, "silu")
    close(y, ref_y, torch.bfloat16)
    assert torch.equal(state.double(), ref_state)


@needs_cuda
@pytest.mark.skipif(not kt.HAS_CUSTOM_OPS, reason="needs torch >= 2.4 (torch.library.custom_op)")
def test_compiled_step_mutates_the_state_as_eager():
    dev = "cuda"
    x = torch.randn(5, 48, 2, device=dev, dtype=torch.float16)
    state = torch.randn(7, 48, 6, device=dev, dtype=torch.float16)
    weight = torch.randn(48, 4, device=dev, dtype=torch.float16)
    bias = torch.randn(48, device=dev, dtype=torch.float16)
    positions = torch.tensor([0, 2, 5, 9, 13], dtype=torch.int32, device=dev)
    indices = torch.tensor([6, 0, 3, 2, 5], dtype=torch.int32, device=dev)

    def step(x, state):
        return kt.causal_conv1d_update(x, state, weight, bias, activation="silu", cache_seqlens=positions,
                                       conv_state_indices=indices, overlap_prologue=True) * 2

    eager_state, compiled_state = state.clone(), state.clone()
    expected = step(x, eager_state)
    got = torch.compile(step, fullgraph=True)(x, compiled_state)
    torch.cuda.synchronize()
    assert torch.equal(got, expected)
    assert torch.equal(compiled_state, eager_state)
