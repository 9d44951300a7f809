"""The C ABI through ctypes, without torch: loading, struct layouts, errors naming their field,
contexts, counters, the no-GPU path. Runs everywhere (CI has no GPU)."""

import ctypes
import os
import subprocess
import sys
import threading

import pytest

import kvtune
from kvtune import _capi


def has_gpu():
    """Whether the driver reports a device (without torch and without touching kvtune's state)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


@pytest.fixture
def context():
    with kvtune.Context(policy="heuristic", cache_path="") as c:
        yield c


def normalize_args():
    a = _capi.normalize_args()
    a.x, a.y, a.rows, a.cols, a.mode = 0x100000, 0x200000, 64, 128, _capi.LAYERNORM
    return a


def dwconv_args():
    a = _capi.dwconv_args()
    a.layout, a.n, a.c, a.w, a.kernel_w, a.causal = _capi.NCL, 2, 64, 256, 4, 1
    a.x, a.weight, a.y = 0x100000, 0x200000, 0x300000
    return a


def test_library_loads_and_reports_its_version():
    assert os.path.exists(kvtune.library_path())
    assert kvtune.version().count(".") == 2
    assert kvtune.abi_version() == _capi.ABI_VERSION


def test_struct_layouts_match_the_header():
    assert ctypes.sizeof(_capi.NormalizeArgs) == 152
    assert _capi.NormalizeArgs.x.offset == 24 and _capi.NormalizeArgs.rstd.offset == 96
    assert ctypes.sizeof(_capi.DwConvArgs) == 216
    assert _capi.DwConvArgs.x.offset == 96 and _capi.DwConvArgs.workspace_bytes.offset == 168
    assert _capi.DwConvArgs.activation.offset == 176
    assert _capi.DwConvArgs.initial_state.offset == 184 and _capi.DwConvArgs.seq_idx.offset == 208
    assert ctypes.sizeof(_capi.ContextOptions) == 80
    assert ctypes.sizeof(_capi.Counters) == 144
    assert ctypes.sizeof(_capi.NormalizeBackwardArgs) == 160
    assert _capi.NormalizeBackwardArgs.x.offset == 24 and _capi.NormalizeBackwardArgs.workspace_bytes.offset == 136


def test_normalize_backward_arguments_name_the_field():
    b = _capi.normalize_backward_args()
    assert b.struct_size == 160 and abs(b.eps - 1e-5) < 1e-12 and b.dgamma is None
    b.mode = _capi.LAYERNORM
    b.x, b.dy, b.dx = 0x100000, 0x200000, 0x300000
    b.rows, b.cols = 64, 128
    b.dgamma = 0x400000
    with pytest.raises(_capi.InvalidArgumentError) as e:
        _capi.normalize_backward(b)
    assert e.value.field == "dgamma" and "needs the forward's gamma" in str(e.value)


def test_init_functions_set_the_defaults():
    a = _capi.normalize_args()
    assert a.struct_size == 152 and abs(a.eps - 1e-5) < 1e-12 and a.x is None and a.ld_x == 0
    d = _capi.dwconv_args()
    assert d.struct_size == 216 and d.seq_idx is None and d.activation == 0 and d.h == 1 and d.kernel_h == 1 and d.deterministic == 1 and d.layout == _capi.NCHW


@pytest.mark.parametrize("field,value,message", [
    ("x", None, "x is a null pointer"),
    ("y", None, "y is a null pointer"),
    ("rows", 0, "rows must be positive"),
    ("cols", -5, "cols must be positive"),
    ("dtype", 9, "no meaning for value 9"),
    ("ld_y", 3, "ld_y (3) must be 0 or >= cols"),
    ("ddof", 2, "ddof must be 0 or 1"),
])
def test_normalize_errors_name_the_field(context, field, value, message):
    a = normalize_args()
    setattr(a, field, value)
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        _capi.normalize(a, context=context)
    assert e.value.field == field
    assert e.value.status_name == "KVT_ERROR_INVALID_ARGUMENT"
    assert message in str(e.value)
    assert f"[field {field}]" in str(e.value)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("field,value,message", [
    ("weight", None, "weight is a null pointer"),
    ("y", None, "y is a null pointer"),
    ("c", 0, "c must be positive"),
    ("layout", 7, "layout"),
    ("kernel_w", 64, "kernel_w must be in 1..63"),
    ("pad_left", 2, "causal sets the padding"),
])
def test_dwconv_errors_name_the_field(context, field, value, message):
    a = dwconv_args()
    setattr(a, field, value)
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        _capi.dwconv(a, context=context)
    assert e.value.field == ("causal" if field == "pad_left" else field)
    assert message in str(e.value)
    with pytest.raises(kvtune.InvalidArgumentError):
        _capi.dwconv_workspace_size(a, context=context)


def test_dwconv_activation_rules_name_the_field(context):
    a = dwconv_args()
    a.activation = 5
    with pytest.raises(kvtune.InvalidArgumentError, match="no meaning for value 5") as e:
        _capi.dwconv(a, context=context)
    assert e.value.field == "activation"
    # backward_data with an activation recomputes conv(x) + bias: x is needed; backward_weight: weight.
    a = dwconv_args()
    a.direction, a.activation = _capi.BACKWARD_DATA, _capi.ACT_SILU
    a.x, a.y, a.dy, a.dx = None, None, 0x400000, 0x500000
    with pytest.raises(kvtune.InvalidArgumentError, match="x is a null pointer") as e:
        _capi.dwconv(a, context=context)
    assert e.value.field == "x"
    a = dwconv_args()
    a.direction, a.activation = _capi.BACKWARD_WEIGHT, _capi.ACT_RELU
    a.weight, a.y, a.dy, a.dweight = None, None, 0x400000, 0x500000
    with pytest.raises(kvtune.InvalidArgumentError, match="weight is a null pointer") as e:
        _capi.dwconv_workspace_size(a, context=context)
    assert e.value.field == "weight"


@pytest.mark.parametrize("direction,fields,field,message", [
    (_capi.FORWARD, {"causal": 0, "final_state": 0x600000}, "final_state", "causal 1D"),
    (_capi.FORWARD, {"initial_state": 0x600000, "seq_idx": 0x700000}, "seq_idx", "initial state"),
    (_capi.FORWARD, {"dinitial_state": 0x600000}, "dinitial_state", "backward_data"),
    (_capi.FORWARD, {"final_state": 0x100040}, "final_state", "overlaps x"),
    (_capi.FORWARD, {"seq_idx": 0x600002}, "seq_idx", "aligned to 4 bytes"),
    (_capi.BACKWARD_DATA, {"final_state": 0x600000}, "final_state", "forward"),
])
def test_dwconv_states_rules_name_the_field(context, direction, fields, field, message):
    a = dwconv_args()
    a.direction = direction
    if direction != _capi.FORWARD:
        a.y, a.dy, a.dx = None, 0x400000, 0x500000
    for name, value in fields.items():
        setattr(a, name, value)
    with pytest.raises(kvtune.InvalidArgumentError, match=message) as e:
        _capi.dwconv(a, context=context)
    assert e.value.field == field


def test_struct_size_is_checked(context):
    a = normalize_args()
    a.struct_size = 0
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        _capi.normalize(a, context=context)
    assert e.value.field == "struct_size"


def test_context_options_are_validated():
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kvtune.Context(policy="sometimes")
    assert e.value.field == "policy"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kvtune.Context(cache_path="", log_level="loud")
    assert e.value.field == "log_level"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kvtune.Context(cache_path="", buckets="8,4")
    assert e.value.field == "buckets"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kvtune.Context(cache_path="", budget_ms=float("nan"))
    assert e.value.field == "budget_ms"
    with pytest.raises(kvtune.InvalidArgumentError) as e:
        kvtune.Context(cache_path="", compile_worker="/nonexistent/kvtune-compile-worker")
    assert e.value.field == "compile_worker"
    kvtune.Context(cache_path="", compile_worker="off")  # compiles on this process's threads


def test_counters_and_default_context(context):
    c = context.counters()
    assert set(c) >= {"calls", "table_hits", "tunes", "compiles", "fallback_heuristic"}
    assert all(v == 0 for v in c.values())
    context.wait_background()
    assert isinstance(kvtune.counters(), dict)  # the default context
    assert kvtune.Context.default() is kvtune.Context.default()


def test_the_last_error_is_per_thread(context):
    a = normalize_args()
    a.rows = 0
    with pytest.raises(kvtune.InvalidArgumentError):
        _capi.normalize(a, context=context)
    seen = {}

    def other():
        lib = _capi.library()
        seen["message"] = lib.kvt_last_error_message()
        seen["field"] = lib.kvt_last_error_field()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"message": b"", "field": b""}
    assert _capi.library().kvt_last_error_field() == b"rows"


def test_no_gpu_gives_a_clear_error(context):
    if has_gpu():
        pytest.skip("a GPU is present: the no-GPU path is not reachable (and the fake pointers would be used)")
    with pytest.raises(kvtune.NoGpuError) as e:
        _capi.normalize(normalize_args(), context=context)
    assert e.value.status_name == "KVT_ERROR_NO_GPU"
    assert "no CUDA device available" in str(e.value)
    with pytest.raises(kvtune.NoGpuError):
        _capi.dwconv(dwconv_args(), context=context)
    with pytest.raises(kvtune.NoGpuError):
        _capi.dwconv_variant(dwconv_args(), context=context)


def run_python(code, **env):
    environment = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_kvtune_library_variable_wins_and_a_bad_one_is_reported():
    r = run_python("import kvtune; kvtune.version()", KVTUNE_LIBRARY="/nonexistent/libkvtune.so")
    assert r.returncode != 0
    assert "LibraryNotFoundError" in r.stderr and "/nonexistent/libkvtune.so" in r.stderr
    r = run_python("import kvtune; print(kvtune.library_path())", KVTUNE_LIBRARY=kvtune.library_path())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == kvtune.library_path()


def test_import_needs_no_torch():
    r = run_python("import sys; sys.modules['torch'] = None; import kvtune; kvtune.version(); print('ok')")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
