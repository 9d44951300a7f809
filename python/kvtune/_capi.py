"""ctypes binding of kvtune's C ABI (lib/include/kvtune/kvtune_c.h). No torch here.

The library is found, in order, at:
  1. $KVTUNE_LIBRARY (a path to libkvtune.so*),
  2. a copy inside the installed package (kvtune/lib/libkvtune.so*, put there by `pip install`),
  3. the build tree next to this source checkout (<repo>/build/libkvtune.so*),
  4. the system's library path (ctypes.util.find_library("kvtune"), e.g. after `cmake --install`).

Hot-path design: the function pointers are resolved once with their argtypes, and each thread keeps
one args struct per operator that callers fill and pass by reference (ctypes releases the GIL during
the call, so a struct shared between threads could be rewritten mid-call).
"""

import ctypes
import ctypes.util
import glob
import os
import threading

__all__ = [
    "KvtuneError", "InvalidArgumentError", "NoGpuError", "CaptureError", "LibraryNotFoundError",
    "NormalizeArgs", "NormalizeBackwardArgs", "DwConvArgs", "DwConvDecodeArgs", "Context", "library", "library_path", "version", "abi_version",
    "normalize", "normalize_backward", "normalize_backward_workspace_size", "normalize_backward_variant",
    "dwconv", "dwconv_workspace_size", "normalize_variant", "dwconv_variant", "counters",
    "dwconv_decode_args", "dwconv_decode", "dwconv_decode_variant",
    "get_context", "set_context",
    "F32", "F16", "BF16", "STANDARDIZE", "LAYERNORM", "RMSNORM", "NCL", "NLC", "NCHW", "NHWC",
    "FORWARD", "BACKWARD_DATA", "BACKWARD_WEIGHT",
    "ACT_NONE", "ACT_SILU", "ACT_GELU_TANH", "ACT_GELU_ERF", "ACT_RELU",
]

ABI_VERSION = 1

# Enum values of kvtune_c.h.
F32, F16, BF16 = 0, 1, 2
STANDARDIZE, LAYERNORM, RMSNORM = 0, 1, 2
NCL, NLC, NCHW, NHWC = 0, 1, 2, 3
ACT_NONE, ACT_SILU, ACT_GELU_TANH, ACT_GELU_ERF, ACT_RELU = 0, 1, 2, 3, 4
FORWARD, BACKWARD_DATA, BACKWARD_WEIGHT = 0, 1, 2
POLICIES = {"tune": 0, "heuristic": 1, "cached": 2, "background": 3, "record": 4}

OK = 0
STATUS_NAMES = {
    0: "KVT_OK", 1: "KVT_ERROR_INVALID_ARGUMENT", 2: "KVT_ERROR_NO_GPU", 3: "KVT_ERROR_UNSUPPORTED_DEVICE",
    4: "KVT_ERROR_CUDA", 5: "KVT_ERROR_OUT_OF_MEMORY", 6: "KVT_ERROR_COMPILE", 7: "KVT_ERROR_CACHE",
    8: "KVT_ERROR_CAPTURE", 9: "KVT_ERROR_TUNING", 10: "KVT_ERROR_INTERNAL",
}


class KvtuneError(RuntimeError):
    """A kvtune failure. `status` is the C status code, `status_name` its name, `field` the
    offending argument field ("" when the error is not about one field)."""

    def __init__(self, message, status=10, field=""):
        super().__init__(message)
        self.status = status
        self.status_name = STATUS_NAMES.get(status, "KVT_ERROR_UNKNOWN")
        self.field = field


class InvalidArgumentError(KvtuneError, ValueError):
    """An invalid argument; `field` names it (also in the message as "[field NAME]")."""


class NoGpuError(KvtuneError):
    """No CUDA device or driver (or a device kvtune does not support)."""


class CaptureError(KvtuneError):
    """The stream is being captured and the problem is not loaded: run it once before capture."""


class LibraryNotFoundError(KvtuneError, OSError):
    """libkvtune.so was not found (see the module docstring for where it is looked for)."""


_ERROR_TYPES = {1: InvalidArgumentError, 2: NoGpuError, 3: NoGpuError, 8: CaptureError}


class NormalizeArgs(ctypes.Structure):
    """kvt_normalize_args (152 bytes on LP64)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_int32), ("mode", ctypes.c_int32),
        ("ddof", ctypes.c_int32), ("eps", ctypes.c_float), ("reserved0", ctypes.c_int32),
        ("x", ctypes.c_void_p), ("y", ctypes.c_void_p),
        ("rows", ctypes.c_int64), ("cols", ctypes.c_int64), ("ld_x", ctypes.c_int64), ("ld_y", ctypes.c_int64),
        ("gamma", ctypes.c_void_p), ("beta", ctypes.c_void_p), ("mean", ctypes.c_void_p), ("rstd", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("residual", ctypes.c_void_p), ("ld_residual", ctypes.c_int64),
        ("residual_out", ctypes.c_void_p), ("ld_residual_out", ctypes.c_int64),
    ]


class NormalizeBackwardArgs(ctypes.Structure):
    """kvt_normalize_backward_args (160 bytes on LP64)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_int32), ("mode", ctypes.c_int32),
        ("ddof", ctypes.c_int32), ("eps", ctypes.c_float), ("reserved0", ctypes.c_int32),
        ("x", ctypes.c_void_p), ("dy", ctypes.c_void_p), ("dx", ctypes.c_void_p),
        ("rows", ctypes.c_int64), ("cols", ctypes.c_int64), ("ld_x", ctypes.c_int64), ("ld_dy", ctypes.c_int64),
        ("ld_dx", ctypes.c_int64),
        ("gamma", ctypes.c_void_p), ("mean", ctypes.c_void_p), ("rstd", ctypes.c_void_p),
        ("dgamma", ctypes.c_void_p), ("dbeta", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("dresidual_out", ctypes.c_void_p), ("ld_dresidual_out", ctypes.c_int64),
    ]


class DwConvArgs(ctypes.Structure):
    """kvt_dwconv_args (216 bytes on LP64)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("direction", ctypes.c_int32), ("layout", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("n", ctypes.c_int64), ("c", ctypes.c_int64), ("h", ctypes.c_int64), ("w", ctypes.c_int64),
        ("kernel_h", ctypes.c_int32), ("kernel_w", ctypes.c_int32), ("stride_h", ctypes.c_int32),
        ("stride_w", ctypes.c_int32), ("dilation_h", ctypes.c_int32), ("dilation_w", ctypes.c_int32),
        ("pad_top", ctypes.c_int32), ("pad_bottom", ctypes.c_int32), ("pad_left", ctypes.c_int32),
        ("pad_right", ctypes.c_int32), ("causal", ctypes.c_int32), ("deterministic", ctypes.c_int32),
        ("x", ctypes.c_void_p), ("weight", ctypes.c_void_p), ("bias", ctypes.c_void_p), ("y", ctypes.c_void_p),
        ("dy", ctypes.c_void_p), ("dx", ctypes.c_void_p), ("dweight", ctypes.c_void_p), ("dbias", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("activation", ctypes.c_int32), ("reserved1", ctypes.c_int32),
        ("initial_state", ctypes.c_void_p), ("final_state", ctypes.c_void_p), ("dinitial_state", ctypes.c_void_p),
        ("seq_idx", ctypes.c_void_p),
    ]


class DwConvDecodeArgs(ctypes.Structure):
    """kvt_dwconv_decode_args (120 bytes on LP64)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_int32),
        ("batch", ctypes.c_int64), ("channels", ctypes.c_int64), ("seqlen", ctypes.c_int64),
        ("kernel_w", ctypes.c_int32), ("activation", ctypes.c_int32),
        ("state_len", ctypes.c_int64), ("state_slots", ctypes.c_int64),
        ("x", ctypes.c_void_p), ("weight", ctypes.c_void_p), ("bias", ctypes.c_void_p), ("y", ctypes.c_void_p),
        ("state", ctypes.c_void_p), ("cache_seqlens", ctypes.c_void_p), ("state_indices", ctypes.c_void_p),
        ("overlap_prologue", ctypes.c_int32),
    ]


class ContextOptions(ctypes.Structure):
    """kvt_context_options (80 bytes on LP64)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("policy", ctypes.c_int32),
        ("cache_path", ctypes.c_char_p), ("log_level", ctypes.c_char_p), ("buckets", ctypes.c_char_p),
        ("timing_samples", ctypes.c_int32), ("compile_threads", ctypes.c_int32),
        ("budget_variants", ctypes.c_int32), ("hot_l2", ctypes.c_int32), ("budget_ms", ctypes.c_double),
        ("retune", ctypes.c_int32), ("reserved0", ctypes.c_int32), ("lease_seconds", ctypes.c_double),
        ("compile_worker", ctypes.c_char_p),
    ]


_COUNTER_NAMES = (
    "calls", "table_hits", "cache_hits", "tunes", "heuristic_uses", "compiles", "variants_timed",
    "variants_rejected", "fallback_exact", "fallback_bucket", "fallback_nearest", "fallback_heuristic",
    "binaries_reused", "lease_waits", "background_swaps", "records", "cache_rows_rejected",
)


class Counters(ctypes.Structure):
    """kvt_counters (144 bytes)."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved0", ctypes.c_uint32)] + [
        (name, ctypes.c_uint64) for name in _COUNTER_NAMES]


# ---- finding and loading the library ---------------------------------------------------------

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("KVTUNE_LIBRARY")
    if env:
        return [("$KVTUNE_LIBRARY", env)]
    found = []
    for pattern in ("libkvtune.so", "libkvtune.so.*", "libkvtune.dylib"):
        found += [("installed package", p) for p in sorted(glob.glob(os.path.join(_here, "lib", pattern)))]
    build = os.path.join(os.path.dirname(os.path.dirname(_here)), "build")
    for pattern in ("libkvtune.so", "libkvtune.so.*"):
        found += [("build tree", p) for p in sorted(glob.glob(os.path.join(build, pattern)))]
    system = ctypes.util.find_library("kvtune")
    if system:
        found.append(("system library path", system))
    return found


_lock = threading.Lock()
_lib = None
_lib_path = None


def _declare(lib):
    c_status = ctypes.c_int
    vp = ctypes.c_void_p
    sigs = {
        "kvt_version": (ctypes.c_char_p, []),
        "kvt_abi_version": (ctypes.c_uint32, []),
        "kvt_context_options_init": (None, [ctypes.POINTER(ContextOptions)]),
        "kvt_normalize_args_init": (None, [ctypes.POINTER(NormalizeArgs)]),
        "kvt_dwconv_args_init": (None, [ctypes.POINTER(DwConvArgs)]),
        "kvt_normalize_backward_args_init": (None, [ctypes.POINTER(NormalizeBackwardArgs)]),
        "kvt_normalize_backward": (c_status, [vp, ctypes.POINTER(NormalizeBackwardArgs), vp]),
        "kvt_normalize_backward_workspace_size": (c_status, [vp, ctypes.POINTER(NormalizeBackwardArgs), vp,
                                                             ctypes.POINTER(ctypes.c_size_t)]),
        "kvt_normalize_backward_variant": (c_status, [vp, ctypes.POINTER(NormalizeBackwardArgs), vp, ctypes.c_char_p,
                                                      ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
        "kvt_context_create": (c_status, [ctypes.POINTER(ContextOptions), ctypes.POINTER(vp)]),
        "kvt_context_destroy": (None, [vp]),
        "kvt_default_context": (c_status, [ctypes.POINTER(vp)]),
        "kvt_normalize": (c_status, [vp, ctypes.POINTER(NormalizeArgs), vp]),
        "kvt_normalize_workspace_size": (c_status, [vp, ctypes.POINTER(NormalizeArgs), vp,
                                                    ctypes.POINTER(ctypes.c_size_t)]),
        "kvt_dwconv": (c_status, [vp, ctypes.POINTER(DwConvArgs), vp]),
        "kvt_dwconv_workspace_size": (c_status, [vp, ctypes.POINTER(DwConvArgs), vp, ctypes.POINTER(ctypes.c_size_t)]),
        "kvt_normalize_variant": (c_status, [vp, ctypes.POINTER(NormalizeArgs), vp, ctypes.c_char_p, ctypes.c_size_t,
                                             ctypes.POINTER(ctypes.c_size_t)]),
        "kvt_dwconv_variant": (c_status, [vp, ctypes.POINTER(DwConvArgs), vp, ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.POINTER(ctypes.c_size_t)]),
        "kvt_dwconv_decode_args_init": (None, [ctypes.POINTER(DwConvDecodeArgs)]),
        "kvt_dwconv_decode": (c_status, [vp, ctypes.POINTER(DwConvDecodeArgs), vp]),
        "kvt_dwconv_decode_variant": (c_status, [vp, ctypes.POINTER(DwConvDecodeArgs), vp, ctypes.c_char_p,
                                                 ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
        "kvt_get_counters": (c_status, [vp, ctypes.POINTER(Counters)]),
        "kvt_wait_background": (c_status, [vp]),
        "kvt_last_error_message": (ctypes.c_char_p, []),
        "kvt_last_error_field": (ctypes.c_char_p, []),
        "kvt_last_error_status": (c_status, []),
        "kvt_status_name": (ctypes.c_char_p, [c_status]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def library():
    """The loaded ctypes.CDLL (loaded on first use)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for where, path in _candidates():
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{where}: {path} ({e})")
                continue
            try:
                _declare(lib)
            except AttributeError as e:
                tried.append(f"{where}: {path} has no C ABI ({e}): a libkvtune older than the Python package")
                continue
            if lib.kvt_abi_version() != ABI_VERSION:
                tried.append(f"{where}: {path} has C ABI version {lib.kvt_abi_version()}, this package needs "
                             f"{ABI_VERSION}")
                continue
            _bind(lib)
            _lib_path = path
            _lib = lib
            return lib
        raise LibraryNotFoundError(
            "kvtune: libkvtune.so not found; set KVTUNE_LIBRARY to its path, install the package from a "
            "build (pip install ./python after cmake --build build), or build the tree next to this "
            "package. Tried: " + ("; ".join(tried) if tried else "nothing (no candidate exists)"),
            status=10)


def library_path():
    """Where the loaded library came from."""
    library()
    return _lib_path


# Bound function pointers of the hot path (set by _bind).
_normalize_fn = _dwconv_fn = _workspace_fn = _backward_fn = _backward_workspace_fn = _decode_fn = None
_normalize_workspace_fn = None


def _bind(lib):
    global _normalize_fn, _dwconv_fn, _workspace_fn, _backward_fn, _backward_workspace_fn, _decode_fn
    global _normalize_workspace_fn
    _decode_fn = lib.kvt_dwconv_decode
    _normalize_fn = lib.kvt_normalize
    _normalize_workspace_fn = lib.kvt_normalize_workspace_size
    _backward_fn = lib.kvt_normalize_backward
    _backward_workspace_fn = lib.kvt_normalize_backward_workspace_size
    _dwconv_fn = lib.kvt_dwconv
    _workspace_fn = lib.kvt_dwconv_workspace_size


def version():
    """The library's version text, e.g. "0.1.0"."""
    return library().kvt_version().decode()


def abi_version():
    return library().kvt_abi_version()


def raise_error(status):
    """Raises the exception for a nonzero status from the calling thread's last error."""
    lib = library()
    message = (lib.kvt_last_error_message() or b"").decode(errors="replace")
    field = (lib.kvt_last_error_field() or b"").decode(errors="replace")
    raise _ERROR_TYPES.get(status, KvtuneError)(message or STATUS_NAMES.get(status, "kvtune error"), status, field)


# ---- contexts --------------------------------------------------------------------------------

class Context:
    """A kvtune context (cache, policy, dispatch tables, counters). Context() with no argument uses
    the environment's defaults; Context.default() is the process-wide one (a null handle).

    Options: policy ("tune", "heuristic", "cached", "background", "record"), cache_path ("" for
    in-memory), log_level, buckets, timing_samples, compile_threads, budget_variants, budget_ms,
    hot_l2, retune, lease_seconds, compile_worker ("" beside the library, "off", or a path).
    """

    _default = None

    def __init__(self, policy=None, cache_path=None, log_level=None, buckets=None, timing_samples=None,
                 compile_threads=None, budget_variants=None, budget_ms=None, hot_l2=None, retune=None,
                 lease_seconds=None, compile_worker=None, _handle=None):
        lib = library()
        if _handle is not None:
            self._handle, self._owned = _handle, False
            return
        o = ContextOptions()
        lib.kvt_context_options_init(ctypes.byref(o))
        if policy is not None:
            if policy not in POLICIES:
                raise InvalidArgumentError(f"kvtune context: unknown policy {policy!r} (expected one of "
                                           f"{', '.join(POLICIES)}) [field policy]", 1, "policy")
            o.policy = POLICIES[policy]
        self._strings = []  # keeps the bytes alive until the call returns
        for name, value in (("cache_path", cache_path), ("log_level", log_level), ("buckets", buckets),
                            ("compile_worker", compile_worker)):
            if value is not None:
                b = os.fsencode(value) if name in ("cache_path", "compile_worker") else str(value).encode()
                self._strings.append(b)
                setattr(o, name, b)
        for name, value in (("timing_samples", timing_samples), ("compile_threads", compile_threads),
                            ("budget_variants", budget_variants), ("budget_ms", budget_ms),
                            ("lease_seconds", lease_seconds)):
            if value is not None:
                setattr(o, name, value)
        if hot_l2 is not None:
            o.hot_l2 = int(bool(hot_l2))
        if retune is not None:
            o.retune = int(bool(retune))
        handle = ctypes.c_void_p()
        status = lib.kvt_context_create(ctypes.byref(o), ctypes.byref(handle))
        self._strings = None
        if status != OK:
            raise_error(status)
        self._handle, self._owned = handle, True

    @classmethod
    def default(cls):
        """The process-wide default context (environment settings; never destroyed)."""
        if cls._default is None:
            cls._default = cls(_handle=ctypes.c_void_p(None))
        return cls._default

    @property
    def handle(self):
        return self._handle

    def counters(self):
        return counters(self)

    def wait_background(self):
        status = library().kvt_wait_background(self._handle)
        if status != OK:
            raise_error(status)

    def close(self):
        if getattr(self, "_owned", False) and self._handle:
            library().kvt_context_destroy(self._handle)
            self._handle = ctypes.c_void_p(None)
            self._owned = False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_current_handle = None  # None: the default context (the C side's null handle)
_current_context = None


def set_context(context):
    """Makes `context` (a Context, or None for the default) the one kvtune.torch uses."""
    global _current_handle, _current_context
    _current_context = context
    _current_handle = None if context is None else context.handle


def get_context():
    return _current_context if _current_context is not None else Context.default()


def _handle_of(context):
    return _current_handle if context is None else context.handle


# ---- calls -----------------------------------------------------------------------------------

_tls = threading.local()


def _reusable_args(name, struct, init):
    """This thread's reusable `struct`, reset to the library's defaults: `init` (kvt_*_args_init)
    fills a template once per thread, and each call copies its bytes over the struct through a
    memoryview (a buffer copy in C, a few times cheaper than a second foreign call per op)."""
    slot = getattr(_tls, name, None)
    if slot is None:
        a = struct()
        getattr(library(), init)(ctypes.byref(a))
        slot = (a, memoryview(a).cast("B"), bytes(a))
        setattr(_tls, name, slot)
    a, view, defaults = slot
    view[:] = defaults
    return a


def normalize_args():
    """This thread's reusable NormalizeArgs, reset to the defaults."""
    return _reusable_args("normalize", NormalizeArgs, "kvt_normalize_args_init")


def normalize_backward_args():
    """This thread's reusable NormalizeBackwardArgs, reset to the defaults."""
    return _reusable_args("normalize_backward", NormalizeBackwardArgs, "kvt_normalize_backward_args_init")


def dwconv_args():
    """This thread's reusable DwConvArgs, reset to the defaults."""
    return _reusable_args("dwconv", DwConvArgs, "kvt_dwconv_args_init")


def normalize(args, stream=None, context=None):
    """kvt_normalize; raises on failure."""
    if _normalize_fn is None:
        library()
    status = _normalize_fn(_handle_of(context), ctypes.byref(args), stream)
    if status:
        raise_error(status)


def normalize_backward(args, stream=None, context=None):
    """kvt_normalize_backward; raises on failure."""
    if _backward_fn is None:
        library()
    status = _backward_fn(_handle_of(context), ctypes.byref(args), stream)
    if status:
        raise_error(status)


def normalize_workspace_size(args, stream=None, context=None):
    """kvt_normalize_workspace_size: bytes of scratch the dispatched variant needs (0 unless it
    splits rows across blocks)."""
    if _normalize_workspace_fn is None:
        library()
    size = ctypes.c_size_t(0)
    status = _normalize_workspace_fn(_handle_of(context), ctypes.byref(args), stream, ctypes.byref(size))
    if status:
        raise_error(status)
    return size.value


def normalize_backward_workspace_size(args, stream=None, context=None):
    """kvt_normalize_backward_workspace_size: bytes of scratch the dispatched variant needs."""
    if _backward_workspace_fn is None:
        library()
    size = ctypes.c_size_t(0)
    status = _backward_workspace_fn(_handle_of(context), ctypes.byref(args), stream, ctypes.byref(size))
    if status:
        raise_error(status)
    return size.value


def normalize_backward_variant(args, stream=None, context=None):
    return _variant(library().kvt_normalize_backward_variant, args, stream, context)


def dwconv(args, stream=None, context=None):
    """kvt_dwconv; raises on failure."""
    if _dwconv_fn is None:
        library()
    status = _dwconv_fn(_handle_of(context), ctypes.byref(args), stream)
    if status:
        raise_error(status)


def dwconv_workspace_size(args, stream=None, context=None):
    """kvt_dwconv_workspace_size: bytes of scratch the dispatched variant needs."""
    if _workspace_fn is None:
        library()
    size = ctypes.c_size_t(0)
    status = _workspace_fn(_handle_of(context), ctypes.byref(args), stream, ctypes.byref(size))
    if status:
        raise_error(status)
    return size.value


def _variant(fn, args, stream, context):
    length = ctypes.c_size_t(0)
    buf = ctypes.create_string_buffer(256)
    status = fn(_handle_of(context), ctypes.byref(args), stream, buf, len(buf), ctypes.byref(length))
    if status:
        raise_error(status)
    if length.value >= len(buf):
        buf = ctypes.create_string_buffer(length.value + 1)
        status = fn(_handle_of(context), ctypes.byref(args), stream, buf, len(buf), ctypes.byref(length))
        if status:
            raise_error(status)
    return buf.value.decode()


def normalize_variant(args, stream=None, context=None):
    """The config label dispatched for args (tunes or loads as a call would)."""
    return _variant(library().kvt_normalize_variant, args, stream, context)


def dwconv_variant(args, stream=None, context=None):
    return _variant(library().kvt_dwconv_variant, args, stream, context)


def dwconv_decode_args():
    """This thread's reusable DwConvDecodeArgs, reset to the defaults."""
    a = getattr(_tls, "dwconv_decode", None)
    if a is None:
        a = _tls.dwconv_decode = DwConvDecodeArgs()
    library().kvt_dwconv_decode_args_init(ctypes.byref(a))
    return a


def dwconv_decode(args, stream=None, context=None):
    """kvt_dwconv_decode; raises on failure."""
    if _decode_fn is None:
        library()
    status = _decode_fn(_handle_of(context), ctypes.byref(args), stream)
    if status:
        raise_error(status)


def dwconv_decode_variant(args, stream=None, context=None):
    return _variant(library().kvt_dwconv_decode_variant, args, stream, context)


def counters(context=None):
    """The context's counters as a dict (kvtune::Counters)."""
    c = Counters()
    c.struct_size = ctypes.sizeof(Counters)
    status = library().kvt_get_counters(_handle_of(context), ctypes.byref(c))
    if status:
        raise_error(status)
    return {name: getattr(c, name) for name in _COUNTER_NAMES}
