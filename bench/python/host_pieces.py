#!/usr/bin/env python3
"""Where the host time of a cached kvtune.torch.layer_norm call goes: the whole call next to its
pieces (output allocation, the C ABI call on a prepared argument struct, the stream and device
queries) and F.layer_norm, per call in microseconds (best of 5 runs of --calls).

usage: python3 bench/python/host_pieces.py [--calls 20000]
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kvtune  # noqa: E402
import kvtune.torch as kt  # noqa: E402
from kvtune import _capi  # noqa: E402


def per_call_us(fn, calls):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, device="cuda")
    b = torch.randn(128, device="cuda")
    y = torch.empty_like(x)
    with torch.no_grad():
        kt.layer_norm(x, 128, w, b)
        kvtune.get_context().wait_background()
        a = _capi.NormalizeArgs()
        _capi.library().kvt_normalize_args_init(a)
        a.dtype, a.mode, a.eps, a.x, a.y, a.rows, a.cols, a.ld_x = _capi.F32, _capi.LAYERNORM, 1e-5, x.data_ptr(), \
            y.data_ptr(), 64, 128, 128
        a.gamma, a.beta = w.data_ptr(), b.data_ptr()
        stream = kt._stream(0)
        pieces = {
            "kt.layer_norm (whole call)": lambda: kt.layer_norm(x, 128, w, b),
            "F.layer_norm": lambda: F.layer_norm(x, (128,), w, b),
            "C ABI kvt_normalize, prepared args": lambda: _capi.normalize(a, stream),
            "torch.empty_like (CUDA)": lambda: torch.empty_like(x, memory_format=torch.contiguous_format),
            "_capi.normalize_args() (reset)": _capi.normalize_args,
            "stream + device query": lambda: (kt._current_device(), kt._stream(0)),
            "torch.compiler.is_compiling": kt._is_compiling,
        }
        print(f"# Host time per call, {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
        print("| piece | us / call |\n|---|---|")
        for name, fn in pieces.items():
            print(f"| {name} | {per_call_us(fn, args.calls):.2f} |")


if __name__ == "__main__":
    main()
