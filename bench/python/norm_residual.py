#!/usr/bin/env python3
"""The fused residual add against the unfused pair and PyTorch, per problem (pre-norm transformers:
s = x + residual, y = norm(s); the backward adds the gradient flowing into s).

Columns (microseconds per call, device time of --calls calls captured in one CUDA graph and replayed,
median of --repeats; inputs rotate over sets whose total exceeds --rotate-mib; random data):
  fused        kvtune.torch.add_<op>: one kernel, reads x and r, writes y and s
  pair         torch.add, then kvtune's normalize of s (the unfused pair on kvtune)
  eager        torch.add, then F.layer_norm / F.rms_norm / the seed's standardize formula
  compiled     torch.compile of the same two lines (Inductor fuses them)
  floor        the byte floor (x, r read; y, s written; weight, bias) at the copy bandwidth of this run
  pct_floor    floor / fused
  fused/pair   the target is >= 1.3
backward (bwd_*): dx from s, dy, ds and the saved statistics with ds added in the kernel (fused),
against kvtune's backward followed by torch.add of ds (pair) and, for layer_norm,
aten.native_layer_norm_backward followed by the add (eager); floor: s, dy, ds read, dx written.
Every kvtune output is checked against float64 first (y and s; dx).

usage: python3 bench/python/norm_residual.py [--json OUT.json] [--only 0,3]
"""

import argparse
import json
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kvtune  # noqa: E402
import kvtune.torch as kt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from norm_backward import (DT, EPS, MODE, copy_bandwidth, forward_ours as norm_ours,  # noqa: E402
                           forward_ref as norm_ref, graph_us, params)

PROBLEMS = [
    ("layer_norm", "bf16", 16384, 1024), ("layer_norm", "bf16", 8192, 4096), ("layer_norm", "f32", 8192, 1024),
    ("layer_norm", "bf16", 4096, 768), ("rms_norm", "bf16", 16384, 2048), ("rms_norm", "bf16", 8192, 4096),
    ("rms_norm", "f32", 4096, 1024), ("standardize", "f32", 16384, 128), ("layer_norm", "bf16", 1024, 1024),
    ("rms_norm", "f32", 8, 1 << 20),
]


def fused(op, x, r, w, b):
    if op == "layer_norm":
        return kt.add_layer_norm(x, r, x.shape[-1], w, b, EPS)
    if op == "rms_norm":
        return kt.add_rms_norm(x, r, x.shape[-1], w, EPS)
    return kt.add_standardize(x, r, EPS, 1)


def ddof(op):
    return 1 if op == "standardize" else 0


def check(op, dtype, rows, cols):
    """Relative L2 errors of y, s and dx against float64 on a slice (at most 256 rows)."""
    n = min(rows, 256)
    x = (torch.randn(n, cols, device="cuda") * 2 + 0.5).to(dtype)
    r = (torch.randn(n, cols, device="cuda") * 4 - 0.25).to(dtype)
    dy = torch.randn(n, cols, device="cuda").to(dtype)
    ds = torch.randn(n, cols, device="cuda").to(dtype)
    w, b = params(op, cols, dtype)
    xl, rl = x.clone().requires_grad_(), r.clone().requires_grad_()
    y, s = fused(op, xl, rl, w, b)
    torch.autograd.backward([y, s], [dy, ds])
    s_ref = (x.float() + r.float()).to(dtype)  # what a separate add writes
    sd = s_ref.double().requires_grad_()
    yd = norm_ref(op, sd, None if w is None else w.double(), None if b is None else b.double())
    (gd,) = torch.autograd.grad(yd, [sd], dy.double())
    gd = gd + ds.double()

    def err(a, ref):
        return ((a.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    return {"y": err(y, yd.detach()), "s_exact": bool(torch.equal(s, s_ref)), "dx": err(xl.grad, gd),
            "dr_equals_dx": bool(torch.equal(xl.grad, rl.grad))}


def measure(op, dtype_name, rows, cols, bandwidth, args):
    dtype = DT[dtype_name]
    elem = torch.tensor([], dtype=dtype).element_size()
    plane = rows * cols * elem
    count = max(1, math.ceil(args.rotate_mib * 2**20 / (4 * plane)))
    xs = [(torch.randn(rows, cols, device="cuda") * 2 + 0.5).to(dtype) for _ in range(count)]
    rs = [(torch.randn(rows, cols, device="cuda") * 4 - 0.25).to(dtype) for _ in range(count)]
    w, b = params(op, cols, dtype)
    affine = (w is not None) + (b is not None)
    row = {"op": op, "dtype": dtype_name, "rows": rows, "cols": cols}
    row.update(check(op, dtype, rows, cols))

    fused(op, xs[0], rs[0], w, b)  # tunes outside the timed region
    norm_ours(op, xs[0] + rs[0], w, b)
    torch.cuda.synchronize()
    row["fused"] = graph_us(lambda i: fused(op, xs[i], rs[i], w, b), count, args.calls, args.repeats)
    row["pair"] = graph_us(lambda i: norm_ours(op, torch.add(xs[i], rs[i]), w, b), count, args.calls, args.repeats)
    row["eager"] = graph_us(lambda i: norm_ref(op, torch.add(xs[i], rs[i]), w, b), count, args.calls, args.repeats)

    def two_lines(x, r, w_, b_):
        s = x + r
        return norm_ref(op, s, w_, b_), s
    compiled = torch.compile(two_lines, dynamic=False)
    for i in range(count):
        compiled(xs[i], rs[i], w, b)
    row["compiled"] = graph_us(lambda i: compiled(xs[i], rs[i], w, b), count, args.calls, args.repeats)
    floor_bytes = 4 * plane + affine * cols * elem
    row["floor"] = floor_bytes / bandwidth * 1e6
    row["pct_floor"] = 100 * row["floor"] / row["fused"]
    row["fused_over_pair"] = row["pair"] / row["fused"]

    # Backward: dx from s, dy, ds and the saved statistics.
    mode = MODE[op]
    dys = [torch.randn(rows, cols, device="cuda").to(dtype) for _ in range(count)]
    dss = [torch.randn(rows, cols, device="cuda").to(dtype) for _ in range(count)]
    saved = [kt._norm_forward(mode, xs[i], cols, w, b, EPS, ddof(op), True, rs[i]) for i in range(count)]

    def bwd(i, ds):
        _, mean, rstd, s = saved[i]
        return kt._norm_backward(mode, s, cols, w, mean, rstd, EPS, ddof(op), dys[i], True, w is not None,
                                 b is not None, ds)
    bwd(0, dss[0])
    bwd(0, None)
    torch.cuda.synchronize()
    row["bwd_fused"] = graph_us(lambda i: bwd(i, dss[i]), count, args.calls, args.repeats)
    row["bwd_pair"] = graph_us(lambda i: torch.add(bwd(i, None)[0], dss[i]), count, args.calls, args.repeats)
    if op == "layer_norm":
        tstats = [torch.ops.aten.native_layer_norm(saved[i][3], [cols], w, b, EPS)[1:] for i in range(count)]
        row["bwd_eager"] = graph_us(lambda i: torch.add(torch.ops.aten.native_layer_norm_backward(
            dys[i], saved[i][3], [cols], tstats[i][0], tstats[i][1], w, b, [True, True, True])[0], dss[i]), count,
            args.calls, args.repeats)
    row["bwd_floor"] = (4 * plane + (affine + (w is not None)) * cols * elem) / bandwidth * 1e6
    row["bwd_pct_floor"] = 100 * row["bwd_floor"] / row["bwd_fused"]
    row["bwd_fused_over_pair"] = row["bwd_pair"] / row["bwd_fused"]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rotate-mib", type=float, default=256)
    parser.add_argument("--only", help="comma-separated problem indices")
    args = parser.parse_args()
    torch.manual_seed(0)
    bandwidth = copy_bandwidth()
    problems = PROBLEMS if not args.only else [PROBLEMS[int(i)] for i in args.only.split(",")]
    rows = []
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; copy {bandwidth / 1e9:.0f} GB/s", flush=True)
    head = ("problem", "fused", "pair", "eager", "compiled", "floor", "%floor", "f/pair",
            "bwd_fused", "bwd_pair", "bwd_eager", "bwd_%floor", "bwd f/pair", "err y", "err dx", "s exact")
    print(" | ".join(head), flush=True)
    for p in problems:
        r = measure(*p, bandwidth, args)
        rows.append(r)
        print(f"{r['op']} {r['dtype']} {r['rows']}x{r['cols']} | {r['fused']:.1f} | {r['pair']:.1f} | "
              f"{r['eager']:.1f} | {r['compiled']:.1f} | {r['floor']:.1f} | {r['pct_floor']:.0f} | "
              f"{r['fused_over_pair']:.2f} | {r['bwd_fused']:.1f} | {r['bwd_pair']:.1f} | "
              f"{r.get('bwd_eager', float('nan')):.1f} | {r['bwd_pct_floor']:.0f} | {r['bwd_fused_over_pair']:.2f} | "
              f"{r['y']:.1e} | {r['dx']:.1e} | {r['s_exact'] and r['dr_equals_dx']}", flush=True)
    geo = math.exp(statistics.mean(math.log(r["fused_over_pair"]) for r in rows))
    print(f"geomean fused/pair {geo:.2f}; vs compiled "
          f"{math.exp(statistics.mean(math.log(r['compiled'] / r['fused']) for r in rows)):.2f}", flush=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_gbs": bandwidth / 1e9,
           "kvtune": kvtune.__version__ if hasattr(kvtune, "__version__") else None, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
