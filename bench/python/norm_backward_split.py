#!/usr/bin/env python3
"""Where a layer_norm backward's time goes: dx alone against dx with dgamma, and with dgamma and dbeta.

Times kvtune's tuned backward (saved statistics) three ways per shape, and PyTorch's
aten.native_layer_norm_backward with the full and the dx-only output mask, each by CUDA-graph replay
of 20 calls (inputs rotate over 8 sets; median of 15 replays; bf16, random data). The difference
between the rows is what the dgamma/dbeta reduction costs each implementation.

With --profile, each call runs twice without timing instead (for a profiler such as Nsight Compute:
`ncu -k regex:kvt_normalize_backward python3 bench/python/norm_backward_split.py --profile`).

usage: KVTUNE_LIBRARY=<libkvtune.so> python3 bench/python/norm_backward_split.py [--profile] [--shapes RxC,...]
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import norm_backward as nb  # noqa: E402

SHAPES = [(1024, 1024), (4096, 1024)]
COUNT = 8


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true", help="each call twice, untimed (for a profiler)")
    parser.add_argument("--shapes", default=",".join(f"{r}x{c}" for r, c in SHAPES),
                        help="ROWSxCOLS,... (bf16 layer_norm)")
    args = parser.parse_args()
    profile = args.profile
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    kt = nb.kt
    for rows, cols in shapes:
        dt = torch.bfloat16
        xs = [(torch.randn(rows, cols, device="cuda") * 2 + 0.5).to(dt) for _ in range(COUNT)]
        dys = [torch.randn(rows, cols, device="cuda").to(dt) for _ in range(COUNT)]
        w, b = nb.params("layer_norm", cols, dt)
        stats = [nb.saved_stats("layer_norm", x) for x in xs]
        tstats = [torch.ops.aten.native_layer_norm(x, [cols], w, b, nb.EPS)[1:] for x in xs]

        def ours(i, dgamma=True, dbeta=True):
            return kt._norm_backward(nb.MODE["layer_norm"], xs[i], cols, w, stats[i][0], stats[i][1], nb.EPS, 0,
                                     dys[i], True, dgamma, dbeta)

        def theirs(i, mask=(True, True, True)):
            return torch.ops.aten.native_layer_norm_backward(dys[i], xs[i], [cols], tstats[i][0], tstats[i][1], w, b,
                                                            list(mask))

        ours(0), ours(0, False, False), ours(0, True, False)  # tunes outside the timed region
        torch.cuda.synchronize()
        if profile:
            for i in range(2):
                ours(i), ours(i, False, False), theirs(i)
            torch.cuda.synchronize()
            continue
        for name, fn in [("kvtune full", ours), ("kvtune dx only", lambda i: ours(i, False, False)),
                         ("kvtune dx+dgamma", lambda i: ours(i, True, False)), ("torch full", theirs),
                         ("torch dx only", lambda i: theirs(i, (True, False, False)))]:
            print(f"{rows}x{cols} bf16 {name}: {nb.graph_us(fn, COUNT, 20, 15):.2f} us")


if __name__ == "__main__":
    main()
