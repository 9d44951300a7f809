#!/usr/bin/env python3
"""Normalization backward: kvtune's tuned backward kernel against PyTorch, per problem.

Columns (microseconds per call, median of --repeats; inputs rotate over sets whose total exceeds
--rotate-mib so that no call reads a cached input; random data):
  kvtune_bwd   kvtune's backward alone (dx, dweight, dbias from x, dy and the saved mean/rstd),
               device time of --calls calls captured in one CUDA graph and replayed
  torch_bwd    PyTorch's backward alone, the same way: aten.native_layer_norm_backward for
               layer_norm; for rms_norm and standardize (no public backward op) the autograd
               backward of F.rms_norm / the seed's formula, timed as an eager loop of
               torch.autograd.grad on a retained graph (host overhead included)
  floor_us     the byte floor (x and dy read once, dx written once, weight, saved statistics,
               dweight/dbias) at the copy bandwidth measured in this run (torch copy_ of 1 GiB)
  pct_floor    floor_us / kvtune_bwd
  step_*       forward + backward of one layer as a training step runs it (eager loop, host
               overhead included): kvtune.torch, torch eager, torch.compile
Every kvtune gradient is checked against PyTorch's float64 autograd first.

usage: python3 bench/python/norm_backward.py [--json OUT.json] [--markdown OUT.md] [--no-steps] [--only OPS]
       [--shapes ROWSxCOLS,...]
"""

import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kvtune  # noqa: E402
import kvtune.torch as kt  # noqa: E402
from kvtune import _capi  # noqa: E402

EPS = 1e-5
DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
MODE = {"layer_norm": _capi.LAYERNORM, "rms_norm": _capi.RMSNORM, "standardize": _capi.STANDARDIZE}

# (op, dtype, rows, cols): transformer LayerNorm/RMSNorm widths, the packet standardization, and
# small batches.
PROBLEMS = [
    ("layer_norm", "bf16", 4096, 1024), ("layer_norm", "bf16", 16384, 768), ("layer_norm", "bf16", 8192, 4096),
    ("layer_norm", "f32", 8192, 1024), ("layer_norm", "f32", 4096, 8192), ("layer_norm", "bf16", 65536, 128),
    ("layer_norm", "bf16", 1024, 1024),
    ("rms_norm", "bf16", 8192, 4096), ("rms_norm", "bf16", 16384, 2048), ("rms_norm", "f32", 4096, 1024),
    ("standardize", "f32", 16384, 128), ("standardize", "f32", 1024, 128),
]


def forward_ref(op, x, w, b):
    cols = x.shape[-1]
    if op == "layer_norm":
        return F.layer_norm(x, (cols,), w, b, EPS)
    if op == "rms_norm":
        return F.rms_norm(x, (cols,), w, EPS)
    return (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + EPS)


def forward_ours(op, x, w, b):
    cols = x.shape[-1]
    if op == "layer_norm":
        return kt.layer_norm(x, cols, w, b, EPS)
    if op == "rms_norm":
        return kt.rms_norm(x, cols, w, EPS)
    return kt.standardize(x, EPS, 1)


def params(op, cols, dtype):
    if op == "standardize":
        return None, None
    w = (torch.randn(cols, device="cuda") * 0.5 + 1).to(dtype)
    b = (torch.randn(cols, device="cuda") * 0.5).to(dtype) if op == "layer_norm" else None
    return w, b


def saved_stats(op, x):
    """The forward's saved mean and rstd through kvtune (what its backward reads)."""
    mode = MODE[op]
    _, mean, rstd = kt._norm_forward(mode, x, x.shape[-1], None, None, EPS, 1 if op == "standardize" else 0, True)
    return mean, rstd


def kvtune_backward(op, x, dy, w, b, mean, rstd):
    return kt._norm_backward(MODE[op], x, x.shape[-1], w, mean, rstd, EPS, 1 if op == "standardize" else 0, dy,
                             True, w is not None, b is not None)


def graph_us(fn, count, calls, repeats):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            fn(i % count)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i % count)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def eager_us(fn, count, calls, repeats):
    for i in range(3):
        fn(i % count)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls):
            fn(i % count)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def copy_bandwidth():
    a = torch.empty(1 << 28, dtype=torch.float32, device="cuda").uniform_()
    b = torch.empty_like(a)
    us = eager_us(lambda i: b.copy_(a), 1, 10, 9)
    return 2 * a.numel() * 4 / (us * 1e-6)


def check(op, dtype, rows, cols):
    """kvtune's gradients against float64 autograd on a slice of the problem (at most 512 rows)."""
    r = min(rows, 512)
    x = (torch.randn(r, cols, device="cuda") * 2 + 0.5).to(dtype)
    dy = torch.randn(r, cols, device="cuda").to(dtype)
    w, b = params(op, cols, dtype)
    mean, rstd = saved_stats(op, x)
    dx, dw, db = kvtune_backward(op, x, dy, w, b, mean, rstd)
    xd = x.double().requires_grad_()
    wd = None if w is None else w.double().requires_grad_()
    bd = None if b is None else b.double().requires_grad_()
    y = forward_ref(op, xd, wd, bd)
    leaves = [t for t in (xd, wd, bd) if t is not None]
    grads = torch.autograd.grad(y, leaves, dy.double())
    worst = 0.0
    for ours, ref in zip([t for t in (dx, dw, db) if t is not None], grads):
        err = (ours.double().reshape(ref.shape) - ref).norm() / ref.norm().clamp_min(1e-30)
        worst = max(worst, err.item())
    return worst


def measure(op, dtype_name, rows, cols, bandwidth, args):
    dtype = DT[dtype_name]
    elem = torch.tensor([], dtype=dtype).element_size()
    per_set = 3 * rows * cols * elem
    count = max(1, math.ceil(args.rotate_mib * 2**20 / per_set))
    xs = [(torch.randn(rows, cols, device="cuda") * 2 + 0.5).to(dtype) for _ in range(count)]
    dys = [torch.randn(rows, cols, device="cuda").to(dtype) for _ in range(count)]
    w, b = params(op, cols, dtype)
    stats = [saved_stats(op, x) for x in xs]
    kvtune_backward(op, xs[0], dys[0], w, b, *stats[0])  # tunes outside the timed region
    torch.cuda.synchronize()
    ours = graph_us(lambda i: kvtune_backward(op, xs[i], dys[i], w, b, *stats[i]), count, args.calls, args.repeats)

    if op == "layer_norm":
        tstats = [torch.ops.aten.native_layer_norm(x, [cols], w, b, EPS)[1:] for x in xs]
        theirs = graph_us(lambda i: torch.ops.aten.native_layer_norm_backward(
            dys[i], xs[i], [cols], tstats[i][0], tstats[i][1], w, b, [True, True, True]), count, args.calls,
            args.repeats)
        torch_how = "graph"
    else:
        leaves = [[x.detach().requires_grad_()] + ([w.detach().requires_grad_()] if w is not None else [])
                  for x in xs]
        ys = [forward_ref(op, lv[0], lv[1] if len(lv) > 1 else None, None) for lv in leaves]
        theirs = eager_us(lambda i: torch.autograd.grad(ys[i], leaves[i], dys[i], retain_graph=True), count,
                          args.calls, args.repeats)
        torch_how = "eager"

    # Forward + backward of one layer, eager loops (what a training step pays, host included).
    def step(forward):
        def run(i):
            x = xs[i].detach().requires_grad_()
            wl = None if w is None else w.detach().requires_grad_()
            bl = None if b is None else b.detach().requires_grad_()
            y = forward(op, x, wl, bl)
            y.backward(dys[i])
        return run

    step_ours = step_eager = step_compiled = float("nan")
    if not args.no_steps:
        compiled = torch.compile(lambda op_, x, w_, b_: forward_ref(op_, x, w_, b_), dynamic=False)
        step_ours = eager_us(step(forward_ours), count, args.calls, args.repeats)
        step_eager = eager_us(step(forward_ref), count, args.calls, args.repeats)
        step_compiled = eager_us(step(lambda o, x, w_, b_: compiled(o, x, w_, b_)), count, args.calls, args.repeats)

    floor_bytes = 3 * rows * cols * elem + (2 if op != "rms_norm" else 1) * rows * 4
    floor_bytes += (0 if w is None else 2 * cols * elem) + (0 if b is None else cols * elem)
    floor = floor_bytes / bandwidth * 1e6
    return {
        "op": op, "dtype": dtype_name, "rows": rows, "cols": cols, "kvtune_bwd_us": ours, "torch_bwd_us": theirs,
        "torch_bwd_timing": torch_how, "speedup_bwd": theirs / ours, "floor_us": floor, "pct_floor": floor / ours,
        "step_kvtune_us": step_ours, "step_eager_us": step_eager, "step_compile_us": step_compiled,
        "speedup_step_eager": step_eager / step_ours, "speedup_step_compile": step_compiled / step_ours,
        "max_rel_err": check(op, dtype, rows, cols),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--rotate-mib", type=float, default=200)
    p.add_argument("--only", help="comma-separated ops")
    p.add_argument("--shapes", help="comma-separated ROWSxCOLS: only these problems (with --only, both filters)")
    p.add_argument("--no-steps", action="store_true", help="the backward kernels only: skip the step_* columns")
    args = p.parse_args()
    torch.manual_seed(0)
    bandwidth = copy_bandwidth()
    rows = []
    lines = []

    def emit(text):
        print(text, flush=True)
        lines.append(text)

    emit(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, kvtune {kvtune.version()}, "
          f"copy bandwidth {bandwidth / 1e9:.0f} GB/s")
    header = ("| op | dtype | rows x cols | kvtune bwd us | torch bwd us | x | % floor | step kvtune | step eager | "
              "step compile | x eager | x compile | rel err |")
    emit(header)
    emit("|" + "---|" * 13)
    for op, dtype, r, c in PROBLEMS:
        if args.only and op not in args.only.split(","):
            continue
        if args.shapes and f"{r}x{c}" not in args.shapes.split(","):
            continue
        m = measure(op, dtype, r, c, bandwidth, args)
        rows.append(m)
        emit(f"| {op} | {dtype} | {r}x{c} | {m['kvtune_bwd_us']:.2f} | {m['torch_bwd_us']:.2f} ({m['torch_bwd_timing']})"
              f" | {m['speedup_bwd']:.2f} | {100 * m['pct_floor']:.0f} | {m['step_kvtune_us']:.1f} | "
              f"{m['step_eager_us']:.1f} | {m['step_compile_us']:.1f} | {m['speedup_step_eager']:.2f} | "
              f"{m['speedup_step_compile']:.2f} | {m['max_rel_err']:.1e} |")
    geo = math.exp(sum(math.log(m["speedup_bwd"]) for m in rows) / max(1, len(rows)))
    emit(f"\ngeomean backward speedup over PyTorch: {geo:.2f}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "kvtune": kvtune.version(),
           "copy_bandwidth": bandwidth, "rows": rows, "geomean_speedup_bwd": geo}
    if args.json:  # columns not measured (--no-steps) as null, not NaN (not JSON)
        out["rows"] = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}
                       for m in rows]
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, allow_nan=False)


if __name__ == "__main__":
    main()
