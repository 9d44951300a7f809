"""kvtune.torch and kvtune.nn argument handling on the CPU, with any torch (CI: Debian's 1.13):
clear errors for CPU tensors and unsupported dtypes, layouts from memory formats, padding and
output-size arithmetic, module construction and patch()."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

import kvtune  # noqa: E402
import kvtune.nn as knn  # noqa: E402
import kvtune.torch as kt  # noqa: E402
from kvtune import _capi  # noqa: E402


def test_cpu_tensors_are_refused_naming_the_argument():
    x = torch.randn(4, 8)
    with pytest.raises(kvtune.InvalidArgumentError, match=r"x is on cpu: kvtune runs on CUDA tensors only") as e:
        kt.layer_norm(x, 8)
    assert e.value.field == "x"
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only"):
        kt.rms_norm(x, [8])
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only"):
        kt.standardize(x)
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only"):
        kt.dwconv2d(torch.randn(1, 3, 8, 8), torch.randn(3, 1, 3, 3), padding=1)
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only"):
        kt.causal_conv1d(torch.randn(1, 3, 8), torch.randn(3, 1, 4))


def test_residual_forms_refuse_cpu_tensors_and_mismatches_naming_the_argument():
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only") as e:
        kt.add_layer_norm(torch.randn(4, 8), torch.randn(4, 8), 8)
    assert e.value.field == "x"
    with pytest.raises(kvtune.InvalidArgumentError, match="CUDA tensors only"):
        kt.add_rms_norm(torch.randn(4, 8), torch.randn(4, 8), [8])
    with pytest.raises(kvtune.InvalidArgumentError, match="ddof must be 0 or 1") as e:
        kt.add_standardize(torch.randn(4, 8), torch.randn(4, 8), ddof=3)
    assert e.value.field == "ddof"
    assert {"add_layer_norm", "add_rms_norm", "add_standardize"} <= set(kt.__all__)


def test_unsupported_dtypes_are_refused():
    with pytest.raises(kvtune.InvalidArgumentError, match=r"float64: kvtune supports float32, float16 and bfloat16"):
        kt.layer_norm(torch.randn(4, 8, dtype=torch.float64), 8)
    with pytest.raises(kvtune.InvalidArgumentError, match="int32"):
        kt.dwconv1d(torch.zeros(1, 3, 8, dtype=torch.int32), torch.randn(3, 1, 3))


def test_argument_errors_are_value_errors_with_a_field():
    with pytest.raises(ValueError) as e:
        kt.standardize(torch.randn(4, 8), ddof=2)
    assert e.value.field == "ddof"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt._normalized_cols("layer_norm", torch.randn(4, 8), [4])
    assert e.value.field == "normalized_shape"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt._kernel_2d(torch.randn(3, 2, 3, 3), "dwconv2d")
    assert e.value.field == "weight" and "depthwise" in str(e.value)
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kt._padding_2d("full", [3, 3], [1, 1], "dwconv2d")
    assert e.value.field == "padding"


def test_layouts_follow_the_memory_format():
    x = torch.randn(2, 8, 5, 6)
    assert kt._layout_of("t", "x", x) == _capi.NCHW
    assert kt._layout_of("t", "x", x.contiguous(memory_format=torch.channels_last)) == _capi.NHWC
    with pytest.raises(kvtune.InvalidArgumentError, match="neither contiguous nor channels-last"):
        kt._layout_of("t", "x", x[:, :, ::2])
    assert not kt.layout_supported(x.transpose(2, 3))
    s = torch.randn(2, 8, 30)
    assert kt._layout_of("t", "x", s) == _capi.NCL
    assert kt._layout_of("t", "x", torch.randn(2, 30, 8).transpose(1, 2)) == _capi.NLC
    with pytest.raises(kvtune.InvalidArgumentError, match="3D"):
        kt._layout_of("t", "x", torch.randn(8, 30))
    nlc = kt._to_layout(s, _capi.NLC)
    assert nlc.stride() == (240, 1, 8) and torch.equal(nlc, s)
    empty = kt._empty_layout([2, 8, 30], _capi.NLC, s)
    assert empty.shape == (2, 8, 30) and empty.stride() == (240, 1, 8)
    assert kt._empty_layout([2, 8, 5, 6], _capi.NHWC, x).is_contiguous(memory_format=torch.channels_last)


def test_row_strides_of_normalize():
    x = torch.randn(6, 20)
    assert kt._row_stride("t", x, 20, 6) == 20
    assert kt._row_stride("t", x[:, :16], 16, 6) == 20  # a column slice: ld 20
    assert kt.norm_strides_supported(torch.randn(3, 4, 16)[:, :, :8], 8) is True  # one row stride: 16
    assert kt.norm_strides_supported(torch.randn(3, 5, 16)[:, :4, :8], 8) is False  # rows of two strides
    with pytest.raises(kvtune.InvalidArgumentError, match="call .contiguous"):
        kt._row_stride("t", x.t(), 6, 20)


@pytest.mark.parametrize("size,kernel,stride,dilation,pads", [
    (17, 3, 1, 1, (1, 1)), (17, 3, 2, 1, (1, 1)), (64, 7, 1, 2, (6, 6)), (9, 4, 1, 1, (3, 0)), (31, 31, 3, 1, (0, 0)),
])
def test_output_sizes_follow_pytorch(size, kernel, stride, dilation, pads):
    x = torch.randn(1, 2, size)
    w = torch.randn(2, 1, kernel)
    ref = torch.nn.functional.conv1d(torch.nn.functional.pad(x, pads), w, stride=stride, dilation=dilation, groups=2)
    cfg = kt._cfg_1d(kernel, stride, pads, dilation, False, True)
    assert kt._out_shape([1, 2, size], cfg) == list(ref.shape)


def test_same_padding_matches_pytorch():
    for k, d in [(3, 1), (4, 1), (7, 2), (6, 3)]:
        x = torch.randn(1, 2, 11, 13)
        w = torch.randn(2, 1, k, k)
        ref = torch.nn.functional.conv2d(x, w, padding="same", dilation=d, groups=2)
        pads = kt._padding_2d("same", [k, k], [d, d], "t")
        manual = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (pads[2], pads[3], pads[0], pads[1])), w,
                                            dilation=d, groups=2)
        assert torch.allclose(ref, manual, atol=1e-5)


def test_causal_config():
    assert kt._out_shape([2, 4, 50], kt._cfg_1d(4, 1, (0, 0), 1, True, True)) == [2, 4, 50]
    assert kt._out_shape([2, 4, 50], kt._cfg_1d(4, 1, (0, 0), 3, True, True)) == [2, 4, 50]


def test_activation_argument():
    with pytest.raises(kvtune.InvalidArgumentError, match="activation must be None, 'silu'") as e:
        kt.causal_conv1d(torch.randn(1, 3, 8), torch.randn(3, 1, 4), activation="tanh")
    assert e.value.field == "activation"
    with pytest.raises(ValueError, match="activation"):
        kt.dwconv2d(torch.randn(1, 3, 8, 8), torch.randn(3, 1, 3, 3), activation=1)  # names only
    names = {None: _capi.ACT_NONE, "none": _capi.ACT_NONE, "silu": _capi.ACT_SILU, "gelu": _capi.ACT_GELU_ERF,
             "gelu_erf": _capi.ACT_GELU_ERF, "gelu_tanh": _capi.ACT_GELU_TANH, "relu": _capi.ACT_RELU}
    for name, code in names.items():
        assert kt._activation_code("t", name) == code
    # The activation travels in the geometry list to the C ABI struct; without one, cfg[12] is 0.
    cfg = kt._cfg_1d(4, 1, (0, 0), 1, True, True, _capi.ACT_SILU)
    assert cfg[12] == _capi.ACT_SILU and kt._out_shape([2, 4, 50], cfg) == [2, 4, 50]
    assert kt._dw_args(_capi.FORWARD, _capi.NCL, [2, 4, 50], torch.float32, cfg).activation == _capi.ACT_SILU
    assert kt._cfg_2d([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], True)[12] == _capi.ACT_NONE
    assert kt._dw_args(_capi.FORWARD, _capi.NCL, [2, 4, 50], torch.float32, cfg[:12]).activation == _capi.ACT_NONE
    # Modules: checked at construction, kept for forward; patch() leaves them without one.
    assert knn.CausalConv1d(8, 4, activation="silu").activation == "silu"
    assert knn.DepthwiseConv2d(8, 8, 3, groups=8, padding=1, activation="gelu").activation == "gelu"
    assert knn.DepthwiseConv1d(8, 8, 3, groups=8).activation is None
    with pytest.raises(ValueError, match="activation") as e:
        knn.CausalConv1d(8, 4, activation="swish")
    assert e.value.field == "activation"


def test_modules_refuse_what_they_cannot_do():
    with pytest.raises(ValueError, match="not depthwise"):
        knn.DepthwiseConv2d(8, 16, 3, groups=8)
    with pytest.raises(ValueError, match="padding_mode"):
        knn.DepthwiseConv1d(8, 8, 3, groups=8, padding=1, padding_mode="reflect")


def test_modules_take_the_state_dict_of_their_torch_counterparts():
    pairs = [
        (torch.nn.LayerNorm(16), knn.LayerNorm(16)),
        (torch.nn.Conv1d(8, 8, 5, groups=8, padding=2), knn.DepthwiseConv1d(8, 8, 5, groups=8, padding=2)),
        (torch.nn.Conv2d(8, 8, 7, groups=8, padding=3), knn.DepthwiseConv2d(8, 8, 7, groups=8, padding=3)),
        (torch.nn.Conv1d(8, 8, 4, groups=8, padding=3), knn.CausalConv1d(8, 4)),
    ]
    rms_ref = getattr(torch.nn, "RMSNorm", None)
    if rms_ref is not None:
        pairs.append((rms_ref(16), knn.RMSNorm(16)))
    for ref, ours in pairs:
        ours.load_state_dict(ref.state_dict(), strict=True)
        assert isinstance(ours, type(ref)) or type(ref).__name__ == "Conv1d"
        for (n1, p1), (n2, p2) in zip(ref.state_dict().items(), ours.state_dict().items()):
            assert n1 == n2 and torch.equal(p1, p2)
    assert list(knn.RMSNorm(16).state_dict()) == ["weight"]


class Block(torch.nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = torch.nn.LayerNorm(c)
        self.pw = torch.nn.Conv2d(c, 2 * c, 1)  # not depthwise: left
        self.gn = torch.nn.GroupNorm(2, 2 * c)  # no counterpart: left
        self.seq = torch.nn.Sequential(torch.nn.Conv1d(c, c, 4, padding=3, groups=c), torch.nn.LayerNorm(c))
        self.shared = self.norm  # reached by two names


def test_patch_swaps_and_reports():
    model = Block()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = {id(p) for p in model.parameters()}
    report = knn.patch(model)
    swapped = {name for name, _, _ in report.swapped}
    assert swapped == {"dw", "norm", "shared", "seq.0", "seq.1"}
    left = {name: why for name, _, why in report.left}
    assert "not depthwise" in left["pw"]
    assert "no kvtune counterpart" in left["gn"]
    assert isinstance(model.dw, knn.DepthwiseConv2d) and isinstance(model.seq[1], knn.LayerNorm)
    assert model.shared is model.norm
    assert {id(p) for p in model.parameters()} == params  # the same parameter objects
    after = model.state_dict()
    assert list(after) == list(before) and all(torch.equal(before[k], after[k]) for k in before)
    text = str(report)
    assert "swapped dw: torch.nn.modules.conv.Conv2d -> kvtune.nn.DepthwiseConv2d" in text
    assert "left    gn" in text
    assert knn.patch(model).swapped == []  # idempotent


def test_patch_leaves_float64_modules():
    model = torch.nn.Sequential(torch.nn.LayerNorm(4).double())
    report = knn.patch(model)
    assert report.swapped == [] and "float64" in report.left[0][2]


def test_ops_are_registered_when_torch_has_custom_op():
    if not kt.HAS_CUSTOM_OPS:
        pytest.skip(f"needs torch >= 2.4 for torch.library.custom_op, found {torch.__version__}")
    for name in ("layer_norm", "rms_norm", "standardize", "add_norm", "norm_backward", "dwconv1d", "causal_conv1d",
                 "dwconv2d", "dwconv_backward_data", "dwconv_backward_weight"):
        assert hasattr(torch.ops.kvtune, name)


def test_fake_kernels_give_shapes_and_strides_without_a_gpu():
    if not kt.HAS_CUSTOM_OPS:
        pytest.skip(f"needs torch >= 2.4 for torch.library.custom_op, found {torch.__version__}")
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        x = torch.empty(2, 8, 9, 10, device="cuda").contiguous(memory_format=torch.channels_last)
        w = torch.empty(8, 1, 3, 3, device="cuda")
        y = kt.dwconv2d(x, w, None, stride=2, padding=1)
        assert y.shape == (2, 8, 5, 5) and y.is_contiguous(memory_format=torch.channels_last)
        s = torch.empty(4, 30, 16, device="cuda").transpose(1, 2)
        y1 = kt.causal_conv1d(s, torch.empty(16, 1, 4, device="cuda"))
        assert y1.shape == (4, 16, 30) and y1.stride() == (480, 1, 16)
        n = kt.layer_norm(torch.empty(3, 5, 64, device="cuda"), 64)
        assert n.shape == (3, 5, 64)
        y2, s2 = kt.add_rms_norm(torch.empty(3, 5, 64, device="cuda"), torch.empty(3, 5, 64, device="cuda"), 64)
        assert y2.shape == s2.shape == (3, 5, 64)
    del mode
